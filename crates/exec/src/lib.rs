//! flashscan-exec

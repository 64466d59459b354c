//! flashscan-storage

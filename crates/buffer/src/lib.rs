//! flashscan-buffer: the buffer pool.

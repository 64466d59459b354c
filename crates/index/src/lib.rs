//! flashscan-index: B+tree indexes and key lookups.

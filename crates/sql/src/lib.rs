//! flashscan-sql: DataFusion over flashscan tables

//! flashscan-workbench

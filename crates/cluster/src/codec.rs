//! How a scan task crosses the network: datafusion-distributed encodes the plan with
//! DataFusion's protobuf codec and hands nodes it does not know to this one. A
//! `ClusterScanExec` variant becomes its [`ScanRequest`] as JSON, behind a magic and a
//! version, so a worker of another build refuses it in one line instead of misreading it.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};

use crate::host::HostState;
use crate::scan::{ClusterScanExec, ScanRequest};

/// The first bytes of an encoded scan request, and the version of what follows.
pub const SCAN_REQUEST_MAGIC: &[u8; 8] = b"FSCLSCN1";
/// A request is a table name, column and partition numbers: far below this.
pub const SCAN_REQUEST_BYTES_MAX: usize = 4 << 20;

/// On the coordinator `host` is `None` (it encodes); on a worker it is the host that
/// decodes requests into scans of its own files.
#[derive(Debug, Clone, Default)]
pub struct ScanCodec {
    host: Option<Arc<HostState>>,
}

impl ScanCodec {
    pub fn coordinator() -> ScanCodec {
        ScanCodec { host: None }
    }

    pub fn worker(host: Arc<HostState>) -> ScanCodec {
        ScanCodec { host: Some(host) }
    }
}

pub fn encode_request(request: &ScanRequest, buf: &mut Vec<u8>) -> Result<()> {
    buf.extend_from_slice(SCAN_REQUEST_MAGIC);
    serde_json::to_writer(&mut *buf, request).map_err(|e| DataFusionError::Internal(format!("encoding a scan request: {e}")))
}

pub fn decode_request(buf: &[u8]) -> Result<ScanRequest> {
    if buf.len() > SCAN_REQUEST_BYTES_MAX {
        return Err(DataFusionError::Plan(format!("a scan request of {} bytes is larger than {SCAN_REQUEST_BYTES_MAX}", buf.len())));
    }
    let body = buf
        .strip_prefix(SCAN_REQUEST_MAGIC.as_slice())
        .ok_or_else(|| DataFusionError::Plan("not a flashscan scan request (another version of flashscan on the coordinator?)".into()))?;
    serde_json::from_slice(body).map_err(|e| DataFusionError::Plan(format!("a flashscan scan request does not read: line {} column {}", e.line(), e.column())))
}

impl PhysicalExtensionCodec for ScanCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[Arc<dyn ExecutionPlan>], ctx: &TaskContext, _converter: &dyn PhysicalProtoConverterExtension) -> Result<Arc<dyn ExecutionPlan>> {
        if !inputs.is_empty() {
            return Err(DataFusionError::Plan(format!("a flashscan scan has no inputs, this one came with {}", inputs.len())));
        }
        let request = decode_request(buf)?;
        match &self.host {
            Some(host) => host.scan(request, ctx).map(|s| Arc::new(s) as Arc<dyn ExecutionPlan>).map_err(|e| DataFusionError::External(Box::new(e))),
            None => Err(DataFusionError::Plan(format!("the coordinator was sent a scan of {} to run: scans run on the hosts", request.table))),
        }
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>, _converter: &dyn PhysicalProtoConverterExtension) -> Result<()> {
        let Some(scan) = node.downcast_ref::<ClusterScanExec>() else {
            return Err(DataFusionError::NotImplemented(format!("flashscan's codec encodes its scans, not {}", node.name())));
        };
        let Some(request) = scan.request() else {
            return Err(DataFusionError::Internal("a whole-table cluster scan reached the network: the distributed planner did not split it into host tasks".into()));
        };
        encode_request(request, buf)
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::RangeRequest;
    use proptest::prelude::*;

    fn request() -> impl Strategy<Value = ScanRequest> {
        (
            any::<u64>(),
            "[a-z_]{1,12}",
            proptest::option::of(0u32..8),
            1u32..8,
            proptest::collection::vec(0u32..1024, 0..16),
            proptest::collection::vec(0usize..64, 0..8),
            proptest::collection::vec((0usize..64, proptest::option::of(any::<i64>()), proptest::option::of(any::<i64>())), 0..4),
            proptest::option::of(0usize..1_000_000),
            (1usize..1024, 0usize..1024, 1usize..256, 1usize..256),
        )
            .prop_map(|(scan, table, host, host_count, partitions, projection, ranges, limit, (total, pruned, units_wanted, output_partitions))| ScanRequest {
                scan,
                table,
                host,
                host_count,
                partitions,
                projection,
                ranges: ranges.into_iter().map(|(column, min, max)| RangeRequest { column, min, max }).collect(),
                row_filter: None,
                pruning_filters: vec!["o_orderkey = Int64(4)".into()],
                limit,
                partitions_total: total,
                partitions_pruned: pruned,
                units_wanted,
                output_partitions,
            })
    }

    proptest! {
        #[test]
        fn scan_requests_round_trip(r in request()) {
            let mut buf = Vec::new();
            encode_request(&r, &mut buf).unwrap();
            prop_assert_eq!(decode_request(&buf).unwrap(), r);
        }

        /// Bytes from the network never panic the decoder: a request, or an error.
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..256), keep_magic in any::<bool>()) {
            let mut buf = Vec::new();
            if keep_magic {
                buf.extend_from_slice(SCAN_REQUEST_MAGIC);
            }
            buf.extend_from_slice(&bytes);
            let _ = decode_request(&buf);
        }

        /// A request cut short (in the magic, in the JSON, its last byte gone) is an error,
        /// never a shorter request.
        #[test]
        fn a_truncated_request_is_an_error(r in request()) {
            let mut buf = Vec::new();
            encode_request(&r, &mut buf).unwrap();
            for cut in [0, 4, SCAN_REQUEST_MAGIC.len(), buf.len() / 2, buf.len() - 1] {
                prop_assert!(decode_request(&buf[..cut]).is_err(), "cut at {}", cut);
            }
        }
    }
}

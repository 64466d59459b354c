//! `flashscan worker DB --listen ADDR`: serves a host's partitions to datafusion-distributed
//! (its gRPC worker service), decoding each scan task with this host's codec.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::SessionState;
use datafusion_distributed::{ChannelResolver, DistributedExt, Worker, WorkerChannel, WorkerQueryContext};
use flashscan_sql::ReadOptions;

use crate::codec::ScanCodec;
use crate::error::ClusterError;
use crate::host::HostState;
use crate::network::{Channels, Topology};

/// The session a worker runs one task in: DataFusion's, plus flashscan's codec for this
/// host and channels with bounded waits to the other hosts (shuffles read from them).
pub async fn task_session(host: Arc<HostState>, channels: SharedChannels, ctx: WorkerQueryContext) -> Result<SessionState, DataFusionError> {
    Ok(ctx.builder.with_distributed_user_codec(ScanCodec::worker(host)).with_distributed_channel_resolver(channels).build())
}

/// The datafusion-distributed worker of `host`.
pub fn host_worker(host: Arc<HostState>) -> Worker {
    let channels = SharedChannels(Arc::new(Channels::new(Topology::default())));
    Worker::from_session_builder(move |ctx: WorkerQueryContext| task_session(host.clone(), channels.clone(), ctx))
}

/// One set of channels for all the tasks of a worker (a session is built per task).
#[derive(Clone)]
pub struct SharedChannels(pub Arc<Channels>);

#[async_trait::async_trait]
impl ChannelResolver for SharedChannels {
    async fn get_worker_client_for_url(&self, url: &url::Url) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        self.0.get_worker_client_for_url(url).await
    }
}

/// Binds `listen` (errors name it) and returns the listener and the host it serves.
pub async fn bind(db_dir: &Path, listen: &str, read_options: ReadOptions) -> Result<(tokio::net::TcpListener, Arc<HostState>), ClusterError> {
    let serve_error = |reason: String| ClusterError::Serve { address: listen.to_string(), reason };
    let address: SocketAddr = listen.parse().map_err(|_| ClusterError::InvalidArgument(format!("--listen {listen:?}: give IP:PORT, like 127.0.0.1:7070")))?;
    let listener = tokio::net::TcpListener::bind(address).await.map_err(|e| serve_error(e.to_string()))?;
    let bound = listener.local_addr().map_err(|e| serve_error(e.to_string()))?;
    let host = Arc::new(HostState::open(db_dir, &bound.to_string(), read_options)?);
    Ok((listener, host))
}

/// Serves `host` on `listener` until `shutdown` resolves (or forever).
pub async fn serve(listener: tokio::net::TcpListener, host: Arc<HostState>, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<(), ClusterError> {
    serve_worker(listener, host_worker(host), shutdown).await
}

/// Serves a datafusion-distributed `worker` on `listener` until `shutdown` resolves.
pub async fn serve_worker(listener: tokio::net::TcpListener, worker: Worker, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<(), ClusterError> {
    let address = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(crate::network::KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(crate::network::KEEPALIVE_TIMEOUT))
        .add_service(worker.into_worker_server())
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| ClusterError::Serve { address, reason: e.to_string() })
}

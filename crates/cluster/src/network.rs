//! The coordinator's view of the network: which URL each host has (`WorkerResolver`), and
//! gRPC channels to them with bounded waits (`ChannelResolver`), so a host that is down or
//! stops answering fails the query in seconds instead of hanging it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use datafusion::error::DataFusionError;
use datafusion_distributed::grpc::{create_worker_client, BoxCloneSyncChannel};
use datafusion_distributed::{ChannelResolver, WorkerChannel, WorkerResolver};
use url::Url;

use crate::cluster_file::ClusterFile;

/// A host that does not accept a connection in this long is down.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings on every connection this often, even while a task computes: a host that
/// died without closing its sockets (power, network, SIGSTOP) misses them.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// A ping unanswered this long closes the connection and fails the query. Interval +
/// timeout + connect stay under the 30 s issue 17 promises for a dead host.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the after-failure probe waits for each host.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// After a transport error with every host answering, probes again this many times, this
/// long apart: a dying host's sockets close a moment after its streams break.
pub const PROBE_RETRIES: u32 = 4;
pub const PROBE_RETRY_AFTER: Duration = Duration::from_millis(500);
const _: () = assert!(CONNECT_TIMEOUT.as_secs() + KEEPALIVE_INTERVAL.as_secs() + KEEPALIVE_TIMEOUT.as_secs() < 30);

/// The hosts of cluster.json, in host order.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub addresses: Vec<String>,
    pub urls: Vec<Url>,
}

impl Topology {
    pub fn of(file: &ClusterFile) -> Result<Topology, DataFusionError> {
        let addresses: Vec<String> = file.hosts.iter().map(|h| h.address.clone()).collect();
        let urls = addresses
            .iter()
            .map(|a| Url::parse(&format!("http://{a}")).map_err(|e| DataFusionError::Plan(format!("host address {a:?}: {e}"))))
            .collect::<Result<_, _>>()?;
        Ok(Topology { addresses, urls })
    }

    pub fn host_count(&self) -> u32 {
        self.urls.len() as u32
    }

    /// "host 1 (127.0.0.1:7001)" for the host with this URL.
    pub fn describe_url(&self, url: &Url) -> String {
        match self.urls.iter().position(|u| u == url) {
            Some(i) => format!("host {i} ({})", self.addresses[i]),
            None => url.to_string(),
        }
    }

    /// The hosts that do not accept a TCP connection now: said after a query failed, so
    /// the error names the host that went away.
    pub async fn unreachable_hosts(&self) -> Vec<String> {
        let probes = self.addresses.iter().enumerate().map(|(i, a)| async move {
            let ok = matches!(tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(a.as_str())).await, Ok(Ok(_)));
            (!ok).then(|| format!("host {i} ({a})"))
        });
        futures::future::join_all(probes).await.into_iter().flatten().collect()
    }
}

impl WorkerResolver for Topology {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        Ok(self.urls.clone())
    }
}

/// Channels to the hosts, one per URL, reused across tasks; a failed one is dropped so the
/// next query connects again.
pub struct Channels {
    topology: Topology,
    cache: Mutex<HashMap<Url, tonic::transport::Channel>>,
}

impl Channels {
    pub fn new(topology: Topology) -> Channels {
        Channels { topology, cache: Mutex::new(HashMap::new()) }
    }

    async fn channel(&self, url: &Url) -> Result<tonic::transport::Channel, DataFusionError> {
        if let Some(c) = self.cache.lock().ok().and_then(|c| c.get(url).cloned()) {
            return Ok(c);
        }
        let host = self.topology.describe_url(url);
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
            .map_err(|e| DataFusionError::Plan(format!("{host}: bad address: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true)
            .tcp_nodelay(true);
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| DataFusionError::Execution(format!("{host} does not answer: {e} (is `flashscan worker` running there?)")))?;
        if let Ok(mut c) = self.cache.lock() {
            c.insert(url.clone(), channel.clone());
        }
        Ok(channel)
    }
}

#[async_trait]
impl ChannelResolver for Channels {
    async fn get_worker_client_for_url(&self, url: &Url) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        let channel = self.channel(url).await?;
        Ok(create_worker_client(BoxCloneSyncChannel::new(channel)))
    }
}

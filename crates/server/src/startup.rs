//! A connection's start: the connection limit (SQLSTATE 53300, then the connection is
//! closed, as PostgreSQL does), authentication (trust, or an MD5 password from
//! `--password-file`), the backend key for cancel requests, and the server parameters.

use std::collections::HashMap;
use std::fmt::Debug;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::{finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, ServerParameterProvider, StartupHandler};
use pgwire::api::{ClientInfo, PgWireConnectionState, METADATA_USER};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::startup::{Authentication, SecretKey};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use futures::SinkExt;

use crate::admission::ConnectionSlot;
use crate::cancel::{BackendCancel, BackendRegistration};
use crate::error::{pg_fatal, sqlstate, ServerError};
use crate::shared::Shared;

/// The version clients see: PostgreSQL 15 protocol and catalog answers, flashscan's own.
pub const SERVER_VERSION: &str = concat!("15.0 (flashscan ", env!("CARGO_PKG_VERSION"), ")");
/// A password file holds one password on its first line; more than this is not one.
const PASSWORD_FILE_BYTES_MAX: u64 = 4096;

/// Which password exchange `--password-file` asks for (`--auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PasswordAuth {
    /// SCRAM-SHA-256, PostgreSQL's default since 14: the password never crosses the wire.
    #[default]
    ScramSha256,
    /// MD5 with a per-connection salt (older clients).
    Md5,
    /// The password itself (PostgreSQL's `password`): only for clients that can do nothing
    /// else, and only where the network is trusted (there is no TLS).
    Cleartext,
}

impl PasswordAuth {
    pub fn parse(text: &str) -> Option<PasswordAuth> {
        match text.to_ascii_lowercase().as_str() {
            "scram-sha-256" | "scram" => Some(PasswordAuth::ScramSha256),
            "md5" => Some(PasswordAuth::Md5),
            "password" | "cleartext" => Some(PasswordAuth::Cleartext),
            _ => None,
        }
    }
}

/// How clients prove who they are.
#[derive(Debug, Clone)]
pub enum AuthMethod {
    /// Anyone who reaches the socket (loopback only: `ServerConfig::validate`).
    Trust,
    /// MD5 of the password from the password file; any user name.
    Md5 { password: String },
    /// The password in clear (`--auth password`).
    Cleartext { password: String },
    /// SCRAM-SHA-256 against the keys derived from the password file (one salt per server
    /// start, as a `pg_authid` entry has one).
    Scram { secret: crate::scram::Secret },
}

impl AuthMethod {
    pub fn from_password_file(path: Option<&Path>) -> Result<AuthMethod, ServerError> {
        Self::from_password_file_with(path, PasswordAuth::Md5)
    }

    pub fn from_password_file_with(path: Option<&Path>, kind: PasswordAuth) -> Result<AuthMethod, ServerError> {
        let Some(path) = path else { return Ok(AuthMethod::Trust) };
        use std::io::Read;
        let file = std::fs::File::open(path).map_err(|e| ServerError::Io { what: "reading password file", path: path.to_path_buf(), source: e })?;
        let mut text = String::new();
        file.take(PASSWORD_FILE_BYTES_MAX)
            .read_to_string(&mut text)
            .map_err(|e| ServerError::Io { what: "reading password file", path: path.to_path_buf(), source: e })?;
        let password = text.lines().next().unwrap_or("").trim_end_matches('\r').to_string();
        if password.is_empty() {
            return Err(ServerError::InvalidArgument(format!("password file {}: the first line is empty; put the password there", path.display())));
        }
        Ok(match kind {
            PasswordAuth::Md5 => AuthMethod::Md5 { password },
            PasswordAuth::Cleartext => AuthMethod::Cleartext { password },
            PasswordAuth::ScramSha256 => {
                AuthMethod::Scram { secret: crate::scram::Secret::new(&password, random_bytes::<16>().to_vec(), crate::scram::ITERATIONS) }
            }
        })
    }
}

/// A SCRAM exchange between its first and last message.
#[derive(Debug)]
struct ScramStep(crate::scram::Exchange);

/// One connection's server-side state, kept in pgwire's session extensions.
#[derive(Debug)]
pub struct Backend {
    pub pid: i32,
    pub cancel: Arc<BackendCancel>,
    /// The session's [`DurationSetting`]s, by index.
    durations: Mutex<[Duration; DurationSetting::ALL.len()]>,
    /// `SET flashscan.*`: this connection's switches, from the server's at connect.
    pub settings: Mutex<flashscan_sql::FlashscanSettings>,
    /// BEGIN … COMMIT: rows waiting for COMMIT.
    pub transaction: Mutex<crate::writes::Transaction>,
    /// `SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL …` /
    /// `default_transaction_isolation`: the level of the connection's next transactions.
    pub default_isolation: Mutex<flashscan_write::Isolation>,
    /// `synchronous_commit`: how this connection's commits are acknowledged.
    pub synchronous_commit: Mutex<crate::synchronous_commit::SynchronousCommit>,
    /// COPY FROM STDIN in progress: what it fills and the data received so far.
    pub copy_in: Mutex<Option<crate::writes::CopyIn>>,
    /// The DataFusion state its statements plan in, kept between them (`planning.rs`).
    pub planning: crate::planning::ConnectionPlanning,
    /// DECLARE … CURSOR: the connection's open cursors (`cursors.rs`).
    /// Shared with `pg_cursors` (`cursors::CursorLists`), which lists them to this
    /// connection's queries.
    pub cursors: Arc<Mutex<crate::cursors::Cursors>>,
    _registration: BackendRegistration,
}

impl Backend {
    pub fn duration(&self, setting: DurationSetting) -> Duration {
        self.durations.lock().unwrap_or_else(|p| p.into_inner())[setting as usize]
    }

    pub fn set_duration(&self, setting: DurationSetting, d: Duration) {
        self.durations.lock().unwrap_or_else(|p| p.into_inner())[setting as usize] = d;
    }

    pub fn statement_timeout(&self) -> Duration {
        self.duration(DurationSetting::StatementTimeout)
    }

    pub fn settings(&self) -> std::sync::MutexGuard<'_, flashscan_sql::FlashscanSettings> {
        self.settings.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn transaction(&self) -> std::sync::MutexGuard<'_, crate::writes::Transaction> {
        self.transaction.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the connection's next statement reads besides the committed rows of now: its
    /// open block's own changes and REPEATABLE READ snapshot (`writes::Transaction::own_changes`).
    pub fn own_changes(&self, write: Option<&flashscan_write::WritePath>) -> Result<Option<std::sync::Arc<flashscan_write::own_writes::OwnChanges>>, pgwire::error::PgWireError> {
        self.transaction().own_changes(write)
    }

    pub fn default_isolation(&self) -> flashscan_write::Isolation {
        *self.default_isolation.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn cursors(&self) -> std::sync::MutexGuard<'_, crate::cursors::Cursors> {
        self.cursors.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn synchronous_commit(&self) -> std::sync::MutexGuard<'_, crate::synchronous_commit::SynchronousCommit> {
        self.synchronous_commit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How the connection's next commit is acknowledged (`synchronous_commit`).
    pub fn durability(&self) -> flashscan_write::Durability {
        self.synchronous_commit().durability()
    }

    pub fn copy_in(&self) -> std::sync::MutexGuard<'_, Option<crate::writes::CopyIn>> {
        self.copy_in.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A session setting that is a length of time, taken as PostgreSQL takes it (`SET name = 250`
/// in milliseconds, or `'5s'`); zero turns it off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationSetting {
    /// A query longer than this is canceled. Off by default (PostgreSQL's default).
    StatementTimeout,
    /// How often a running query checks that its client is still there (server/hangup.rs).
    /// On by default, unlike PostgreSQL's.
    ClientConnectionCheckInterval,
}

impl DurationSetting {
    pub const ALL: [Self; 2] = [Self::StatementTimeout, Self::ClientConnectionCheckInterval];

    pub fn name(self) -> &'static str {
        match self {
            Self::StatementTimeout => "statement_timeout",
            Self::ClientConnectionCheckInterval => "client_connection_check_interval",
        }
    }

    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn default(self) -> Duration {
        match self {
            Self::StatementTimeout => Duration::ZERO,
            Self::ClientConnectionCheckInterval => crate::hangup::CLIENT_CHECK_INTERVAL,
        }
    }
}

/// The MD5 salt sent to this connection.
#[derive(Debug)]
struct Md5Salt([u8; 4]);

/// Startup for one connection (pgwire asks the factory for one per connection).
pub struct Startup {
    pub shared: Arc<Shared>,
}

static NEXT_PID: AtomicI32 = AtomicI32::new(10_000);

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    // SAFETY: getrandom writes at most N bytes into the buffer we own.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), N, 0) };
    if n != N as isize {
        // No kernel randomness (very old kernels): the clock's nanoseconds still differ
        // per connection; cancel keys only guard against other local clients.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (t >> (8 * (i % 16))) as u8;
        }
    }
    buf
}

/// Equal, looking at every byte whatever the first difference (password checks).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn md5_hex(data: &[u8]) -> String {
    format!("{:x}", md5::compute(data))
}

/// What an MD5-authenticating client sends: "md5" + md5(md5(password + user) + salt).
pub fn md5_password_response(user: &str, password: &str, salt: &[u8; 4]) -> String {
    let inner = md5_hex(format!("{password}{user}").as_bytes());
    let mut bytes = inner.into_bytes();
    bytes.extend_from_slice(salt);
    format!("md5{}", md5_hex(&bytes))
}

struct Parameters;

impl ServerParameterProvider for Parameters {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<HashMap<String, String>> {
        let mut p = HashMap::new();
        p.insert("server_version".into(), SERVER_VERSION.into());
        p.insert("server_encoding".into(), "UTF8".into());
        p.insert("client_encoding".into(), "UTF8".into());
        p.insert("DateStyle".into(), "ISO, MDY".into());
        p.insert("IntervalStyle".into(), "postgres".into());
        p.insert("TimeZone".into(), "UTC".into());
        p.insert("integer_datetimes".into(), "on".into());
        p.insert("standard_conforming_strings".into(), "on".into());
        p.insert("is_superuser".into(), "off".into());
        p.insert("default_transaction_read_only".into(), crate::pg_settings::fixed_setting("default_transaction_read_only").unwrap_or_default());
        if let Some(user) = client.metadata().get(METADATA_USER) {
            p.insert("session_authorization".into(), user.clone());
        }
        Some(p)
    }
}

impl Startup {
    async fn finish<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // A bad `-c synchronous_commit=…` in the startup options refuses the connection, as
        // PostgreSQL refuses a bad option.
        let synchronous_commit = crate::synchronous_commit::SynchronousCommit::from_startup_options(client.metadata().get("options").map(String::as_str))
            .map_err(|e| match e {
                PgWireError::UserError(info) => pg_fatal(&info.code, info.message),
                other => other,
            })?;
        let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
        let secret = i32::from_be_bytes(random_bytes::<4>());
        client.set_pid_and_secret_key(pid, SecretKey::I32(secret));
        let cancel = Arc::new(BackendCancel::default());
        let registration = self.shared.cancels.register(pid, secret.to_be_bytes().to_vec(), &cancel);
        let backend = Backend {
            pid,
            cancel,
            durations: Mutex::new(DurationSetting::ALL.map(DurationSetting::default)),
            settings: Mutex::new(self.shared.settings()),
            transaction: Mutex::new(Default::default()),
            default_isolation: Mutex::new(Default::default()),
            synchronous_commit: Mutex::new(synchronous_commit),
            copy_in: Mutex::new(None),
            planning: Default::default(),
            cursors: self.shared.cursor_lists.add(pid),
            _registration: registration,
        };
        // The other `-c name=value` options, applied as SET applies them (a setting SET
        // refuses refuses the connection, as PostgreSQL refuses a bad option).
        for (name, value) in crate::synchronous_commit::startup_settings(client.metadata().get("options").map(String::as_str)) {
            if name != crate::synchronous_commit::NAME {
                crate::handler::apply_set(&backend, &name, &value, false, false).map_err(|e| match e {
                    PgWireError::UserError(info) => pg_fatal(&info.code, info.message),
                    other => other,
                })?;
            }
        }
        client.session_extensions().insert(backend);
        finish_authentication(client, &Parameters).await
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                if self.shared.draining() {
                    return Err(pg_fatal(sqlstate::ADMIN_SHUTDOWN, "the database system is shutting down"));
                }
                let Some(slot) = self.shared.admission.try_connect() else {
                    return Err(pg_fatal(
                        sqlstate::TOO_MANY_CONNECTIONS,
                        format!("sorry, too many clients already ({} connections open; the server's --max-connections)", self.shared.admission.max_connections),
                    ));
                };
                client.session_extensions().insert::<ConnectionSlot>(slot);
                match &self.shared.auth {
                    AuthMethod::Trust => self.finish(client).await?,
                    AuthMethod::Md5 { .. } => {
                        let salt = random_bytes::<4>();
                        client.session_extensions().insert(Md5Salt(salt));
                        client.set_state(PgWireConnectionState::AuthenticationInProgress);
                        client.send(PgWireBackendMessage::Authentication(Authentication::MD5Password(salt.to_vec()))).await?;
                    }
                    AuthMethod::Cleartext { .. } => {
                        client.set_state(PgWireConnectionState::AuthenticationInProgress);
                        client.send(PgWireBackendMessage::Authentication(Authentication::CleartextPassword)).await?;
                    }
                    AuthMethod::Scram { .. } => {
                        client.set_state(PgWireConnectionState::AuthenticationInProgress);
                        client.send(PgWireBackendMessage::Authentication(Authentication::SASL(vec![crate::scram::MECHANISM.to_string()]))).await?;
                    }
                }
            }
            PgWireFrontendMessage::PasswordMessageFamily(pwd) => {
                let user = client.metadata().get(METADATA_USER).cloned().unwrap_or_default();
                let failed = || pg_fatal(sqlstate::INVALID_PASSWORD, format!("password authentication failed for user \"{user}\""));
                match &self.shared.auth {
                    AuthMethod::Trust => return Err(pg_fatal(sqlstate::PROTOCOL_VIOLATION, "unexpected password message")),
                    AuthMethod::Md5 { password } => {
                        let given = pwd.into_password()?.password;
                        let salt = client.session_extensions().get::<Md5Salt>().map(|s| s.0);
                        let ok = salt.map(|s| constant_time_eq(given.as_bytes(), md5_password_response(&user, password, &s).as_bytes())).unwrap_or(false);
                        if !ok {
                            return Err(failed());
                        }
                        self.finish(client).await?;
                    }
                    AuthMethod::Cleartext { password } => {
                        let given = pwd.into_password()?.password;
                        if !constant_time_eq(given.as_bytes(), password.as_bytes()) {
                            return Err(failed());
                        }
                        self.finish(client).await?;
                    }
                    AuthMethod::Scram { secret } => match client.session_extensions().get::<ScramStep>() {
                        None => {
                            let first = pwd.into_sasl_initial_response()?;
                            if first.auth_method != crate::scram::MECHANISM {
                                return Err(pg_fatal(sqlstate::PROTOCOL_VIOLATION, format!("SASL mechanism {:?}: this server offers {}", first.auth_method, crate::scram::MECHANISM)));
                            }
                            let data = first.data.unwrap_or_default();
                            let (exchange, answer) = crate::scram::server_first(secret, &data, &random_bytes::<18>())
                                .map_err(|m| pg_fatal(sqlstate::PROTOCOL_VIOLATION, m))?;
                            client.session_extensions().insert(ScramStep(exchange));
                            client.send(PgWireBackendMessage::Authentication(Authentication::SASLContinue(bytes::Bytes::from(answer)))).await?;
                        }
                        Some(step) => {
                            let last = pwd.into_sasl_response()?;
                            let answer = crate::scram::server_final(secret, &step.0, &last.data).map_err(|_| failed())?;
                            client.send(PgWireBackendMessage::Authentication(Authentication::SASLFinal(bytes::Bytes::from(answer)))).await?;
                            self.finish(client).await?;
                        }
                    },
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_response_matches_postgresql() {
        // libpq: "md5" + md5(md5(password || user) || salt); value computed with
        // Python's hashlib for password "secret", user "alice", salt 01 02 03 04.
        assert_eq!(md5_password_response("alice", "secret", &[1, 2, 3, 4]), EXPECTED_ALICE);
    }

    const EXPECTED_ALICE: &str = "md598a0412b9c31436fc53776e863350083";
}

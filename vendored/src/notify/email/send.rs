//! Sending a mail over SMTP, and what the attempt came to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::compose;
use super::resolve::{Lookup, resolve};
use super::settings::{SmtpSettings, TlsMode};
use crate::domain::notices::{EmailRoute, NoticeBody};
use crate::notify::delivery::Attempt;
use crate::support::secrets::{self, Redactor};

/// How long one send may take, from connecting to the server's answer to
/// the message, unless [`EmailSender::with_timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Transports kept at most: one per SMTP server (settings change only when
/// an operator changes the environment, so this is a handful at most).
const MAX_TRANSPORTS: usize = 16;

type Transport = AsyncSmtpTransport<Tokio1Executor>;

/// Sends notices by mail. One per process: it keeps a transport (the TLS
/// set-up, the server's address, the credentials) per SMTP server. Each
/// send opens its own connection and closes it after: notices are rare,
/// and a pool would hold idle connections to the relay, which relays time
/// out and refuse.
pub struct EmailSender {
    timeout: Duration,
    roots: Vec<Certificate>,
    lookup: Arc<Lookup>,
    transports: Mutex<HashMap<SmtpSettings, Transport>>,
}

impl Default for EmailSender {
    fn default() -> Self {
        EmailSender::new()
    }
}

impl std::fmt::Debug for EmailSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailSender")
            .field("timeout", &self.timeout)
            .field("extra_roots", &self.roots.len())
            .finish_non_exhaustive()
    }
}

/// Why extra root certificates were not taken.
#[derive(Debug, thiserror::Error)]
#[error("not PEM certificates: {0}")]
pub struct RootCertificateError(String);

impl EmailSender {
    /// A sender reading `${NAME}` references from the process environment
    /// (each value found is remembered for redaction), trusting the Mozilla
    /// roots (webpki-roots), with a [`DEFAULT_TIMEOUT`].
    pub fn new() -> EmailSender {
        EmailSender {
            timeout: DEFAULT_TIMEOUT,
            roots: Vec::new(),
            lookup: Arc::new(|name: &str| {
                let value = std::env::var(name).ok();
                if let Some(v) = &value {
                    secrets::remember(v);
                }
                value
            }),
            transports: Mutex::new(HashMap::new()),
        }
    }

    /// How long one send may take in all (connecting, TLS, AUTH, the
    /// message): past it the attempt is `Failed`, and retried.
    pub fn with_timeout(mut self, timeout: Duration) -> EmailSender {
        self.timeout = timeout;
        self
    }

    /// Trust these PEM certificates as well as the Mozilla roots: a relay
    /// with a certificate from a private CA.
    pub fn with_root_certificates(
        mut self,
        pem: &[u8],
    ) -> Result<EmailSender, RootCertificateError> {
        let certificate =
            Certificate::from_pem(pem).map_err(|e| RootCertificateError(e.to_string()))?;
        self.roots.push(certificate);
        self.transports = Mutex::new(HashMap::new());
        Ok(self)
    }

    /// Read `${NAME}` references through `lookup` instead of the process
    /// environment (tests, or an application with its own secret store).
    pub fn with_lookup(
        mut self,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> EmailSender {
        self.lookup = Arc::new(lookup);
        self
    }

    /// Send one notice to one decider: `route` as the spec wrote it (its
    /// references resolved now), the decider's name (their address is
    /// `route.to[name]`, or the name when it is an address), the notice's
    /// body and id, and the signed link bound to that decider.
    ///
    /// An unset or empty variable, or a value that is not a URL or an
    /// address, is `Misconfigured`, naming the setting and the variable,
    /// never a value.
    pub async fn deliver(
        &self,
        route: &EmailRoute,
        recipient_name: &str,
        body: &NoticeBody,
        id: &str,
        link: Option<&str>,
    ) -> Attempt {
        let resolved = match resolve(route, recipient_name, &*self.lookup) {
            Ok(resolved) => resolved,
            Err(error) => return Attempt::Misconfigured { error },
        };
        let message = match compose::compose(body, resolved.to, resolved.from, id, link) {
            Ok(message) => message,
            Err(e) => {
                return Attempt::Misconfigured {
                    error: format!("cannot write the mail for notice {id}: {e}"),
                };
            }
        };
        self.send(&resolved.settings, &message).await
    }

    /// Send `message` to its recipients through the server `settings` names.
    ///
    /// The server's acceptance of the message is `Sent`. Everything else is
    /// `Failed` with what went wrong (the server's reply text included),
    /// and retried until the retry window closes: a 4xx reply, a refused
    /// connection, a timeout, a TLS failure, and a 5xx reply too. A 5xx is
    /// final for the one message as SMTP sees it, but here it is mostly
    /// about the set-up rather than the notice (a wrong password, a sender
    /// the relay does not accept for this account, a recipient's mailbox
    /// that is not there yet, a relay that answers 5xx while it is being
    /// reconfigured), which an operator fixes without touching the outbox;
    /// sending again then succeeds. If nobody does, the window makes the
    /// notice dead with the server's text as its last error, for
    /// `tollgate notifications list` to show. Not `Gone`: that disables an
    /// endpoint, and mail has no endpoint to disable.
    ///
    /// No error text holds the password: it is cut out of whatever the
    /// client or the server said.
    pub async fn send(&self, settings: &SmtpSettings, message: &Message) -> Attempt {
        let transport = match self.transport(settings) {
            Ok(transport) => transport,
            Err(error) => return Attempt::Misconfigured { error },
        };
        let server = format!("SMTP server {}:{}", settings.host, settings.port);
        let sent = tokio::time::timeout(
            self.timeout,
            transport.send_raw(message.envelope(), &message.formatted()),
        )
        .await;
        let error = match sent {
            Ok(Ok(_)) => return Attempt::Sent,
            Ok(Err(e)) if e.is_permanent() => format!("{server} refused the mail: {e}"),
            Ok(Err(e)) if e.is_transient() => format!("{server} refused the mail for now: {e}"),
            Ok(Err(e)) => format!("{server}: {}", root_cause(&e)),
            Err(_) => format!(
                "{server} did not take the mail within {}",
                crate::support::time::format_duration(self.timeout)
            ),
        };
        Attempt::Failed {
            error: redact(&error, settings),
            retry_after: None,
        }
    }

    /// The transport for `settings`, built once.
    fn transport(&self, settings: &SmtpSettings) -> Result<Transport, String> {
        let mut transports = self.transports.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(transport) = transports.get(settings) {
            return Ok(transport.clone());
        }
        let transport = self.build(settings)?;
        if transports.len() >= MAX_TRANSPORTS {
            transports.clear();
        }
        transports.insert(settings.clone(), transport.clone());
        Ok(transport)
    }

    fn build(&self, settings: &SmtpSettings) -> Result<Transport, String> {
        let parameters = || {
            let mut builder = TlsParameters::builder(settings.host.clone());
            for root in &self.roots {
                builder = builder.add_root_certificate(root.clone());
            }
            builder
                .build_rustls()
                .map_err(|e| format!("cannot set up TLS for {}: {e}", settings.host))
        };
        let tls = match settings.tls {
            TlsMode::Implicit => Tls::Wrapper(parameters()?),
            TlsMode::StartTls => Tls::Required(parameters()?),
            TlsMode::Opportunistic => Tls::Opportunistic(parameters()?),
            TlsMode::None => Tls::None,
        };
        let mut builder = Transport::builder_dangerous(settings.host.as_str())
            .port(settings.port)
            .tls(tls)
            .timeout(Some(self.timeout));
        if let Some(credentials) = &settings.credentials {
            builder = builder
                .credentials(Credentials::new(
                    credentials.user.clone(),
                    credentials.password().to_string(),
                ))
                .authentication(vec![Mechanism::Plain, Mechanism::Login]);
        }
        Ok(builder.build())
    }
}

/// What lies under a client-side error: the deepest source's text
/// ("Connection refused (os error 111)", "invalid peer certificate:
/// UnknownIssuer"), which says more than lettre's kind ("Connection
/// error"), repeated at each level it wraps.
fn root_cause(error: &dyn std::error::Error) -> String {
    let mut deepest = error;
    while let Some(source) = deepest.source() {
        deepest = source;
    }
    deepest.to_string()
}

/// `text` without the password (in any form redaction knows) or any
/// other secret this process resolved.
fn redact(text: &str, settings: &SmtpSettings) -> String {
    let text = secrets::known().text(text);
    match &settings.credentials {
        Some(credentials) => Redactor::new(vec![credentials.password().to_string()]).text(&text),
        None => text,
    }
}

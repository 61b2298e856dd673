//! TLS for PostgreSQL connections, over rustls (already in every build
//! through reqwest, so this adds no crate to the tree).
//!
//! The URL says how, with libpq's parameters:
//!
//! - `sslmode=disable`: plain text only.
//! - `sslmode=prefer` (the default, as in libpq): TLS when the server
//!   offers it, plain text otherwise; the certificate is not checked.
//! - `sslmode=require`: TLS or no connection; the certificate is not checked
//!   (encrypted, not authenticated: like libpq). With `sslrootcert` it is
//!   `verify-ca`, as in libpq.
//! - `sslmode=verify-ca`: the chain must end at a trusted root.
//! - `sslmode=verify-full`: the chain, and the host name (or IP address) of
//!   the URL must be one the certificate names.
//! - `sslrootcert=PATH`: the roots to trust, a PEM file (a private CA). Without
//!   it the verifying modes trust the Mozilla roots (webpki-roots), where
//!   libpq would read `~/.postgresql/root.crt`: a server whose certificate
//!   comes from a public CA needs nothing more, and a service with its own
//!   CA publishes the bundle to give here.
//!
//! tokio-postgres knows only disable, prefer and require and no
//! `sslrootcert`, so [`split_url`] takes both out of the URL before the
//! driver parses it, and [`RustlsConnect`] does the rest. Written here
//! rather than taken from `tokio-postgres-rustls`: it is one small trait
//! impl over tokio-rustls, and that crate would add crates to every
//! `postgres` build (it parses certificates with an x509 crate for channel
//! binding) and pin rustls independently of reqwest's.
//!
//! Channel binding (SCRAM-SHA-256-PLUS, `tls-server-end-point`): the hash
//! of the server's certificate, with the hash its signature uses (RFC 5929:
//! SHA-256 for MD5 and SHA-1). [`end_point_hash`] reads the signature
//! algorithm from the certificate's DER with a few lines rather than an
//! x509 crate; for an algorithm it does not know (RSA-PSS, Ed25519) no
//! binding is offered and SCRAM runs without it (`channel_binding=require`
//! then fails, saying so).

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode as DriverSslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// How a connection uses TLS: libpq's `sslmode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other:?} is not one of disable, prefer, require, verify-ca, verify-full"
                ));
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What the driver does before the handshake: whether it may fall back
    /// to plain text. Verification is ours.
    pub fn driver_mode(self) -> DriverSslMode {
        match self {
            SslMode::Disable => DriverSslMode::Disable,
            SslMode::Prefer => DriverSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverSslMode::Require,
        }
    }
}

/// The TLS part of a store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
}

impl TlsSettings {
    /// `sslmode=verify-full, roots from PATH`, for an error message.
    pub fn describe(&self) -> String {
        match &self.root_cert {
            Some(path) => format!(
                "sslmode={}, roots from {}",
                self.mode.as_str(),
                path.display()
            ),
            None if matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull) => {
                format!("sslmode={}, webpki roots", self.mode.as_str())
            }
            None => format!("sslmode={}", self.mode.as_str()),
        }
    }
}

/// Take `sslmode` and `sslrootcert` out of a `postgres://` URL: the rest
/// goes to tokio-postgres, which would refuse `verify-full` and
/// `sslrootcert`. Errors are plain reasons (the caller names the URL,
/// redacted). Finds the query the way tokio-postgres does: after the
/// first `@`, at the first `?`.
pub fn split_url(url: &str) -> Result<(String, TlsSettings), String> {
    let after_scheme = ["postgres://", "postgresql://"]
        .iter()
        .find_map(|p| url.strip_prefix(p))
        .ok_or("not a postgres:// or postgresql:// URL")?;
    let start = url.len() - after_scheme.len();
    let host_at = after_scheme.find('@').map_or(0, |at| at + 1);
    let Some(query_at) = after_scheme[host_at..].find('?') else {
        return Ok((url.to_string(), settings(None, None)?));
    };
    let query_start = start + host_at + query_at;
    let (head, query) = (&url[..query_start], &url[query_start + 1..]);

    let mut mode = None;
    let mut root_cert = None;
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(key)?.as_str() {
            "sslmode" => mode = Some(SslMode::parse(&decode(value)?)?),
            "sslrootcert" => root_cert = Some(PathBuf::from(decode(value)?)),
            "sslcert" | "sslkey" | "sslpassword" => {
                return Err(format!(
                    "{} (a client certificate) is not supported: authenticate with a \
                     user and password over TLS",
                    decode(key)?
                ));
            }
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        head.to_string()
    } else {
        format!("{head}?{}", kept.join("&"))
    };
    Ok((rest, settings(mode, root_cert)?))
}

fn decode(text: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("{text:?} is not UTF-8 once percent-decoded"))
}

/// libpq's defaults: `prefer` when no mode is given; `require` with a root
/// file is `verify-ca`.
fn settings(mode: Option<SslMode>, root_cert: Option<PathBuf>) -> Result<TlsSettings, String> {
    let mode = match (mode.unwrap_or(SslMode::Prefer), &root_cert) {
        (SslMode::Require, Some(_)) => SslMode::VerifyCa,
        (mode, _) => mode,
    };
    if root_cert
        .as_deref()
        .is_some_and(|p| p.as_os_str().is_empty())
    {
        return Err("sslrootcert is empty: give the path of a PEM file".into());
    }
    Ok(TlsSettings { mode, root_cert })
}

/// The `MakeTlsConnect` of every connection a store makes (pooled, the
/// migration's, the LISTEN one): one rustls configuration, shared.
#[derive(Clone)]
pub struct RustlsConnect {
    config: Arc<ClientConfig>,
}

impl RustlsConnect {
    /// Build the client configuration; reads `sslrootcert` now, so a
    /// missing or unreadable file fails the start, naming the file.
    pub fn new(settings: &TlsSettings) -> Result<RustlsConnect, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let verifier: Arc<dyn ServerCertVerifier> = match settings.mode {
            SslMode::Disable | SslMode::Prefer | SslMode::Require => {
                Arc::new(EncryptOnly { provider })
            }
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let roots = Arc::new(roots(settings.root_cert.as_deref())?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| format!("cannot set up certificate checks: {e}"))?;
                Arc::new(Verify {
                    webpki,
                    check_name: settings.mode == SslMode::VerifyFull,
                })
            }
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(RustlsConnect {
            config: Arc::new(config),
        })
    }
}

fn roots(file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let Some(file) = file else {
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(store);
    };
    let unreadable =
        |e: &dyn std::fmt::Display| format!("cannot read sslrootcert {}: {e}", file.display());
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| unreadable(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(&e))?;
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!(
            "sslrootcert {} holds no usable PEM certificate",
            file.display()
        ));
    }
    Ok(store)
}

/// `prefer` and `require`: any certificate, but the handshake's signatures
/// are still checked against it (the session is encrypted to whoever holds
/// that certificate's key).
#[derive(Debug)]
struct EncryptOnly {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `verify-ca` and `verify-full`: webpki's checks. `verify-ca` accepts a
/// certificate for another name: webpki checks the chain first and the
/// name last, so a name error means the chain was good.
#[derive(Debug)]
struct Verify {
    webpki: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for Verify {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsHandshake;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, host: &str) -> Result<RustlsHandshake, Self::Error> {
        Ok(RustlsHandshake {
            config: self.config.clone(),
            server_name: ServerName::try_from(host.to_string())?,
        })
    }
}

/// One handshake, with the host name the URL gave (for SNI and
/// `verify-full`; an IP address is checked against the certificate's IP
/// names).
pub struct RustlsHandshake {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

type Handshake<S> = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

impl<S> TlsConnect<S> for RustlsHandshake
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Handshake<S>;

    fn connect(self, stream: S) -> Handshake<S> {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            let tls = connector.connect(self.server_name, stream).await?;
            Ok(RustlsStream(tls))
        })
    }
}

/// A connection after the handshake.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref();
        session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|cert| end_point_hash(cert.as_ref()))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

/// Signature algorithm OIDs (DER content bytes) and the hash RFC 5929 binds
/// with: the signature's own, SHA-256 for MD5 and SHA-1.
const SIGNATURE_HASHES: &[(&[u8], Hash)] = &[
    // md5, sha1, sha256, sha384, sha512 WithRSAEncryption (1.2.840.113549.1.1.4/5/11/12/13)
    (
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x04],
        Hash::Sha256,
    ),
    (
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05],
        Hash::Sha256,
    ),
    (
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b],
        Hash::Sha256,
    ),
    (
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c],
        Hash::Sha384,
    ),
    (
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d],
        Hash::Sha512,
    ),
    // ecdsa-with-SHA1 (1.2.840.10045.4.1), -SHA256/384/512 (1.2.840.10045.4.3.2/3/4)
    (&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01], Hash::Sha256),
    (
        &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02],
        Hash::Sha256,
    ),
    (
        &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03],
        Hash::Sha384,
    ),
    (
        &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04],
        Hash::Sha512,
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

/// `tls-server-end-point` of a certificate, or `None` when its signature
/// algorithm is not one of [`SIGNATURE_HASHES`] or the DER is not a
/// certificate.
fn end_point_hash(cert: &[u8]) -> Option<Vec<u8>> {
    use sha2::Digest;
    let oid = signature_algorithm(cert)?;
    let (_, hash) = SIGNATURE_HASHES.iter().find(|(known, _)| *known == oid)?;
    Some(match hash {
        Hash::Sha256 => sha2::Sha256::digest(cert).to_vec(),
        Hash::Sha384 => sha2::Sha384::digest(cert).to_vec(),
        Hash::Sha512 => sha2::Sha512::digest(cert).to_vec(),
    })
}

/// The OID of `Certificate.signatureAlgorithm`: SEQUENCE { tbsCertificate
/// SEQUENCE, signatureAlgorithm SEQUENCE { OID, ... }, signature }.
fn signature_algorithm(cert: &[u8]) -> Option<&[u8]> {
    let (certificate, _) = der_element(cert, 0x30)?;
    let (_tbs, rest) = der_element(certificate, 0x30)?;
    let (algorithm, _) = der_element(rest, 0x30)?;
    let (oid, _) = der_element(algorithm, 0x06)?;
    Some(oid)
}

/// One DER element with tag `tag` at the start of `input`: its contents and
/// what follows it.
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = input.split_first()?;
    if first != tag {
        return None;
    }
    let (&len_byte, rest) = rest.split_first()?;
    let (len, rest) = if len_byte < 0x80 {
        (usize::from(len_byte), rest)
    } else {
        let count = usize::from(len_byte & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, rest) = rest.split_at(count);
        let len = bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
        (len, rest)
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn split(url: &str) -> (String, TlsSettings) {
        split_url(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn the_default_is_prefer_as_in_libpq() {
        let (rest, tls) = split("postgres://app:pw@db:5432/x");
        assert_eq!(rest, "postgres://app:pw@db:5432/x");
        assert_eq!(tls.mode, SslMode::Prefer);
        assert_eq!(tls.root_cert, None);
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_and_the_rest_kept() {
        let (rest, tls) = split(
            "postgresql://app:p%3Fw@db/x?application_name=a&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        );
        assert_eq!(
            rest,
            "postgresql://app:p%3Fw@db/x?application_name=a&connect_timeout=3"
        );
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_cert.as_deref(), Some(Path::new("/etc/ca.pem")));
        tokio_postgres::Config::from_str(&rest).expect("the driver reads what is left");

        let (rest, tls) = split("postgres://db/x?sslmode=disable");
        assert_eq!(rest, "postgres://db/x");
        assert_eq!(tls.mode, SslMode::Disable);
    }

    #[test]
    fn require_with_a_root_file_is_verify_ca() {
        let (_, tls) = split("postgres://db/x?sslmode=require&sslrootcert=ca.pem");
        assert_eq!(tls.mode, SslMode::VerifyCa);
        let (_, tls) = split("postgres://db/x?sslmode=require");
        assert_eq!(tls.mode, SslMode::Require);
    }

    #[test]
    fn a_question_mark_in_the_password_is_not_the_query() {
        let (rest, tls) = split("postgres://app:a?b@db/x?sslmode=require");
        assert_eq!(rest, "postgres://app:a?b@db/x");
        assert_eq!(tls.mode, SslMode::Require);
    }

    #[test]
    fn an_unknown_sslmode_or_a_client_certificate_is_refused_by_name() {
        let err = split_url("postgres://db/x?sslmode=verify_full").expect_err("typo");
        assert!(err.contains("sslmode=\"verify_full\""), "{err}");
        assert!(err.contains("verify-full"), "{err}");
        let err = split_url("postgres://db/x?sslcert=c.pem").expect_err("client cert");
        assert!(err.contains("sslcert"), "{err}");
        let err = split_url("postgres://db/x?sslrootcert=").expect_err("empty");
        assert!(err.contains("sslrootcert"), "{err}");
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "writes a certificate file, never a database file"
    )]
    fn a_missing_or_empty_root_file_is_named() {
        let missing = TlsSettings {
            mode: SslMode::VerifyFull,
            root_cert: Some(PathBuf::from("/nonexistent/ca.pem")),
        };
        let err = RustlsConnect::new(&missing).err().expect("missing file");
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");

        let dir = std::env::temp_dir().join(format!("tollgate-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let err = RustlsConnect::new(&TlsSettings {
            mode: SslMode::VerifyCa,
            root_cert: Some(empty.clone()),
        })
        .err()
        .expect("no certificate");
        assert!(err.contains("no usable PEM certificate"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A DER element: tag, definite length, contents.
    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if contents.len() < 0x80 {
            out.push(contents.len() as u8);
        } else {
            out.push(0x82);
            out.extend_from_slice(&(contents.len() as u16).to_be_bytes());
        }
        out.extend_from_slice(contents);
        out
    }

    fn certificate_signed_with(oid: &[u8]) -> Vec<u8> {
        // A long tbsCertificate, so its length takes the long form.
        let tbs = der(0x30, &[0x05; 300]);
        let algorithm = der(0x30, &[der(0x06, oid), vec![0x05, 0x00]].concat());
        let signature = der(0x03, &[0x00, 0x01, 0x02]);
        der(0x30, &[tbs, algorithm, signature].concat())
    }

    #[test]
    fn the_channel_binding_hash_follows_the_certificates_signature() {
        use sha2::Digest;
        let ecdsa_sha384 = [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
        let cert = certificate_signed_with(&ecdsa_sha384);
        assert_eq!(
            end_point_hash(&cert),
            Some(sha2::Sha384::digest(&cert).to_vec())
        );
        // RFC 5929: SHA-1 becomes SHA-256.
        let rsa_sha1 = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05];
        let cert = certificate_signed_with(&rsa_sha1);
        assert_eq!(
            end_point_hash(&cert),
            Some(sha2::Sha256::digest(&cert).to_vec())
        );
        // Ed25519 (1.3.101.112): no binding rather than a wrong one.
        assert_eq!(
            end_point_hash(&certificate_signed_with(&[0x2b, 0x65, 0x70])),
            None
        );
        // Not DER at all, or cut short.
        assert_eq!(end_point_hash(b"not a certificate"), None);
        let cert = certificate_signed_with(&ecdsa_sha384);
        assert_eq!(end_point_hash(&cert[..cert.len() / 2]), None);
    }

    #[test]
    fn every_mode_builds_a_connector() {
        for mode in [
            SslMode::Disable,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            let tls = TlsSettings {
                mode,
                root_cert: None,
            };
            assert!(RustlsConnect::new(&tls).is_ok(), "{mode:?}");
        }
    }
}

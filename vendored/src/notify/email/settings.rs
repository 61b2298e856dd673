//! Where mail goes: `approvals.notify.email.smtp_url`, once its `${NAME}`
//! references are resolved.
//!
//! ```text
//! smtp://[user[:password]@]host[:port][?tls=required|opportunistic|none]
//! smtps://[user[:password]@]host[:port]
//! ```
//!
//! `smtp://` upgrades with STARTTLS and, by default, refuses a server that
//! does not offer it (port 587, mail submission): credentials and the
//! message never cross the network in the clear by accident.
//! `?tls=opportunistic` upgrades when the server offers it; `?tls=none`
//! never does (a relay on localhost, a test server). `smtps://` is TLS from
//! the first byte (port 465). User and password are percent-decoded, so a
//! password may hold any character (`@` is `%40`, `/` is `%2F`).
//!
//! The URL normally carries a password, so nothing here ever repeats it:
//! an error says which part is wrong without quoting any of the URL, and
//! `Debug` shows the password as `[redacted]`.

use std::fmt;

use percent_encoding::percent_decode_str;

/// How the connection to the SMTP server is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlsMode {
    /// `smtps://`: TLS from the first byte.
    Implicit,
    /// `smtp://` (the default): STARTTLS, and a server that does not offer
    /// it is refused.
    StartTls,
    /// `smtp://...?tls=opportunistic`: STARTTLS when the server offers it,
    /// plaintext otherwise.
    Opportunistic,
    /// `smtp://...?tls=none`: plaintext, for a relay on localhost or tests.
    None,
}

/// The user and password to AUTH with (PLAIN or LOGIN, whichever the server
/// offers), percent-decoded.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SmtpCredentials {
    pub user: String,
    password: String,
}

impl SmtpCredentials {
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> SmtpCredentials {
        SmtpCredentials {
            user: user.into(),
            password: password.into(),
        }
    }

    /// The password, for the SMTP client and for redaction only.
    pub fn password(&self) -> &str {
        &self.password
    }
}

impl fmt::Debug for SmtpCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpCredentials")
            .field("user", &self.user)
            .field("password", &crate::support::secrets::REDACTED)
            .finish()
    }
}

/// One SMTP server as a resolved `smtp_url` names it. Equal settings share
/// a transport (`EmailSender` keeps one per settings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub tls: TlsMode,
    pub credentials: Option<SmtpCredentials>,
}

/// What is wrong with an `smtp_url` (or another part of the email
/// settings). The text never quotes the URL: it may hold a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmailConfigError {
    #[error("smtp_url must start with smtp:// (STARTTLS) or smtps:// (TLS)")]
    Scheme,
    #[error("smtp_url has no host")]
    MissingHost,
    #[error("smtp_url's host is not a host name or an IP address")]
    BadHost,
    #[error("smtp_url's port is not a number from 1 to 65535")]
    BadPort,
    #[error(
        "smtp_url's user or password is not valid percent-encoded UTF-8 \
         (percent-encode `@`, `:`, `/`, `?` and `#` in them)"
    )]
    BadCredentials,
    #[error(
        "smtp_url has a path or a fragment: percent-encode `/`, `?`, `#` and `@` in the user \
         and password"
    )]
    UnexpectedPath,
    #[error("smtp_url's `tls` must be required, opportunistic or none")]
    BadTlsMode,
    #[error("smtps:// is always TLS: use smtp://...?tls={0} for a connection without it")]
    ImplicitTlsOnly(&'static str),
    #[error("smtp_url accepts one query parameter, `tls`")]
    UnknownParameter,
}

impl SmtpSettings {
    /// Read a resolved `smtp_url` (see the module's documentation).
    pub fn parse(resolved_url: &str) -> Result<SmtpSettings, EmailConfigError> {
        let (scheme, rest) = resolved_url
            .split_once("://")
            .ok_or(EmailConfigError::Scheme)?;
        let implicit = match scheme.to_ascii_lowercase().as_str() {
            "smtp" => false,
            "smtps" => true,
            _ => return Err(EmailConfigError::Scheme),
        };
        let (before_query, query) = match rest.split_once('?') {
            Some((before, query)) => (before, Some(query)),
            None => (rest, None),
        };
        // A trailing slash is harmless (`smtp://host:587/`); anything after
        // it, or a fragment, means part of a password was read as a path.
        let authority = before_query.strip_suffix('/').unwrap_or(before_query);
        if authority.contains(['/', '#']) || query.is_some_and(|q| q.contains('#')) {
            return Err(EmailConfigError::UnexpectedPath);
        }
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority),
        };
        let credentials = userinfo.map(credentials).transpose()?;
        let (host, port) = host_and_port(host_port)?;
        let tls = match (implicit, tls_parameter(query)?) {
            (true, None | Some(TlsMode::StartTls)) => TlsMode::Implicit,
            (true, Some(TlsMode::Opportunistic)) => {
                return Err(EmailConfigError::ImplicitTlsOnly("opportunistic"));
            }
            (true, Some(_)) => return Err(EmailConfigError::ImplicitTlsOnly("none")),
            (false, mode) => mode.unwrap_or(TlsMode::StartTls),
        };
        let port = port.unwrap_or(if implicit { 465 } else { 587 });
        Ok(SmtpSettings {
            host,
            port,
            tls,
            credentials,
        })
    }
}

fn credentials(userinfo: &str) -> Result<SmtpCredentials, EmailConfigError> {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let decode = |text: &str| {
        percent_decode_str(text)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| EmailConfigError::BadCredentials)
    };
    let user = decode(user)?;
    if user.is_empty() {
        return Err(EmailConfigError::BadCredentials);
    }
    Ok(SmtpCredentials::new(user, decode(password)?))
}

fn host_and_port(host_port: &str) -> Result<(String, Option<u16>), EmailConfigError> {
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        // An IPv6 literal: `[::1]` or `[::1]:2525`.
        let (ip, after) = bracketed.split_once(']').ok_or(EmailConfigError::BadHost)?;
        if ip.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(EmailConfigError::BadHost);
        }
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or(EmailConfigError::BadHost)?),
        };
        (ip, port)
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err(EmailConfigError::MissingHost);
    }
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    if !host.chars().all(valid) {
        return Err(EmailConfigError::BadHost);
    }
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(port) if port > 0 => Ok(port),
            _ => Err(EmailConfigError::BadPort),
        })
        .transpose()?;
    Ok((host.to_ascii_lowercase(), port))
}

fn tls_parameter(query: Option<&str>) -> Result<Option<TlsMode>, EmailConfigError> {
    let mut mode = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name != "tls" || mode.is_some() {
            return Err(EmailConfigError::UnknownParameter);
        }
        mode = Some(match value {
            "required" => TlsMode::StartTls,
            "opportunistic" => TlsMode::Opportunistic,
            "none" => TlsMode::None,
            _ => return Err(EmailConfigError::BadTlsMode),
        });
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> SmtpSettings {
        SmtpSettings::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn smtp_is_starttls_on_587_and_smtps_is_tls_on_465() {
        let s = parse("smtp://mail.example.com");
        assert_eq!(
            (s.host.as_str(), s.port, s.tls),
            ("mail.example.com", 587, TlsMode::StartTls)
        );
        assert_eq!(s.credentials, None);
        let s = parse("smtps://mail.example.com");
        assert_eq!((s.port, s.tls), (465, TlsMode::Implicit));
        let s = parse("SMTP://Mail.Example.com:2525/");
        assert_eq!((s.host.as_str(), s.port), ("mail.example.com", 2525));
    }

    #[test]
    fn the_tls_parameter_chooses_how_smtp_is_protected() {
        assert_eq!(parse("smtp://h?tls=required").tls, TlsMode::StartTls);
        assert_eq!(
            parse("smtp://h?tls=opportunistic").tls,
            TlsMode::Opportunistic
        );
        assert_eq!(parse("smtp://127.0.0.1:2525?tls=none").tls, TlsMode::None);
        assert_eq!(parse("smtps://h?tls=required").tls, TlsMode::Implicit);
        assert_eq!(
            SmtpSettings::parse("smtps://h?tls=none"),
            Err(EmailConfigError::ImplicitTlsOnly("none"))
        );
        assert_eq!(
            SmtpSettings::parse("smtp://h?tls=sometimes"),
            Err(EmailConfigError::BadTlsMode)
        );
        assert_eq!(
            SmtpSettings::parse("smtp://h?tls=none&pool=1"),
            Err(EmailConfigError::UnknownParameter)
        );
    }

    #[test]
    fn credentials_are_percent_decoded() {
        let s = parse("smtp://mailer%40example.com:p%40ss%3Aw%2Frd@smtp.example.com:587");
        let c = s.credentials.expect("credentials");
        assert_eq!(c.user, "mailer@example.com");
        assert_eq!(c.password(), "p@ss:w/rd");
        assert_eq!(s.host, "smtp.example.com");
        // An unescaped `@` in the password: the last `@` ends the user info.
        let c = parse("smtp://user:p@ss@h")
            .credentials
            .expect("credentials");
        assert_eq!(c.password(), "p@ss");
        let c = parse("smtp://user@h").credentials.expect("credentials");
        assert_eq!((c.user.as_str(), c.password()), ("user", ""));
    }

    #[test]
    fn ipv6_literals_take_brackets() {
        let s = parse("smtp://[::1]:2525?tls=none");
        assert_eq!((s.host.as_str(), s.port), ("::1", 2525));
        assert_eq!(
            SmtpSettings::parse("smtp://[nope]:25"),
            Err(EmailConfigError::BadHost)
        );
    }

    #[test]
    fn errors_never_quote_the_url_and_debug_hides_the_password() {
        let secret = "hunter2-secret";
        for url in [
            format!("http://u:{secret}@h"),
            format!("smtp://u:{secret}@"),
            format!("smtp://u:{secret}@h:port"),
            format!("smtp://u:{secret}/x@h"),
            format!("smtp://u:{secret}?tls=x@h"),
            format!("smtp://u:{secret}%ZZ%FF@h"),
            format!("smtp://u:{secret}@h?{secret}=1"),
            format!("smtp://u:{secret}@h#{secret}"),
            format!("smtp://u:{secret}@bad host"),
        ] {
            let err = SmtpSettings::parse(&url).expect_err(&url);
            let text = err.to_string();
            assert!(!text.contains(secret), "{url}: {text}");
            assert!(!text.contains("hunter"), "{url}: {text}");
        }
        let s = parse(&format!("smtps://u:{secret}@h"));
        let debug = format!("{s:?}");
        assert!(!debug.contains(secret), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }
}

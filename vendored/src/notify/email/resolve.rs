//! A stored route's values, as the spec wrote them, turned into what one
//! send needs: the `${NAME}` references in `smtp_url`, `from` and the
//! decider's address are resolved from the environment now, at send time,
//! so a rotated password or a corrected address needs no new pause.
//!
//! An error names the setting and the variables it was read from, never a
//! value: the URL may hold a password, and an address read from a
//! reference is treated like any other secret.

use lettre::Address;
use lettre::message::Mailbox;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::compose::recipient;
use super::settings::SmtpSettings;
use crate::domain::notices::{EmailRoute, is_address};
use crate::support::secrets;

/// Where a value comes from: an environment variable's value by name.
pub type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// What one mail to one decider needs, resolved.
#[derive(Debug, Clone)]
pub struct ResolvedRoute {
    pub settings: SmtpSettings,
    pub from: Mailbox,
    pub to: Mailbox,
}

/// Characters of a value put into the user info of `smtp_url`: everything
/// but RFC 3986's unreserved characters is percent-encoded, so a password
/// read from `${SMTP_PASSWORD}` may hold `@`, `:` or `/` and still reads
/// back as itself.
const USERINFO_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Resolve `route` for the decider `name`: their address is `route.to[name]`
/// or, when they have no entry, their name if it is an address.
pub fn resolve(route: &EmailRoute, name: &str, lookup: &Lookup) -> Result<ResolvedRoute, String> {
    let url = resolve_smtp_url(&route.smtp_url, lookup)?;
    let settings = SmtpSettings::parse(&url)
        .map_err(|e| format!("approvals.notify.email: {e}{}", read_from(&route.smtp_url)))?;
    if let Some(credentials) = &settings.credentials {
        // Percent-decoded, it may differ from every variable's value.
        secrets::remember(credentials.password());
    }
    let from_text = resolve_value("approvals.notify.email.from", &route.from, lookup)?;
    let from = from_text.parse::<Mailbox>().map_err(|_| {
        format!(
            "approvals.notify.email.from is not a mail address (`Name <name@example.com>` or \
             `name@example.com`){}",
            read_from(&route.from)
        )
    })?;
    let to = match route.to.get(name) {
        Some(written) => {
            let what = format!("approvals.notify.email.to.{name}");
            let text = resolve_value(&what, written, lookup)?;
            let address = parse_address(&text)
                .ok_or_else(|| format!("{what} is not a mail address{}", read_from(written)))?;
            recipient(name, address)
        }
        None if is_address(name) => {
            let address = parse_address(name)
                .ok_or_else(|| format!("the decider {name:?} is not a mail address"))?;
            recipient(name, address)
        }
        None => {
            return Err(format!(
                "the decider {name:?} has no address: add `{name}: address` to approvals.notify.email.to"
            ));
        }
    };
    Ok(ResolvedRoute { settings, from, to })
}

/// An address, alone or as `Name <address>`.
fn parse_address(text: &str) -> Option<Address> {
    let text = text.trim();
    text.parse::<Address>()
        .ok()
        .or_else(|| text.parse::<Mailbox>().ok().map(|m| m.email))
}

/// ` (read from ${A}, ${B})` for a value written with references, or
/// nothing for a literal.
fn read_from(written: &str) -> String {
    let names: Vec<String> = secrets::references(written)
        .iter()
        .map(|r| format!("${{{}}}", r.name))
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(" (read from {})", names.join(", "))
    }
}

/// One setting with its references resolved; an unset or empty variable is
/// an error naming it.
fn resolve_value(what: &str, written: &str, lookup: &Lookup) -> Result<String, String> {
    let value = secrets::resolve_with(written, lookup).map_err(|e| format!("{what}: {e}"))?;
    if value.trim().is_empty() {
        return Err(format!("{what} is empty{}", read_from(written)));
    }
    Ok(value)
}

/// `smtp_url` with its references resolved. A value that lands in the user
/// info (`smtp://user:${SMTP_PASSWORD}@host`) is percent-encoded there, so
/// [`SmtpSettings::parse`] decodes it back to the value whatever it holds;
/// a reference for the whole URL (`${SMTP_URL}`) is used as it is.
fn resolve_smtp_url(written: &str, lookup: &Lookup) -> Result<String, String> {
    let what = "approvals.notify.email.smtp_url";
    let refs = secrets::references(written);
    let userinfo_end = userinfo_end(written, &refs);
    let mut out = String::with_capacity(written.len());
    let mut last = 0;
    for r in &refs {
        out.push_str(&written[last..r.start]);
        let value = resolve_value(what, &written[r.start..r.end], lookup)?;
        if userinfo_end.is_some_and(|end| r.start < end) {
            out.extend(utf8_percent_encode(&value, USERINFO_VALUE));
        } else {
            out.push_str(&value);
        }
        last = r.end;
    }
    out.push_str(&written[last..]);
    if out.trim().is_empty() {
        return Err(format!("{what} is empty{}", read_from(written)));
    }
    Ok(out)
}

/// Where the user info of a written URL ends (its last `@` before the
/// path, query or fragment), looking past the text of references.
fn userinfo_end(written: &str, refs: &[secrets::SecretRef<'_>]) -> Option<usize> {
    let mut blanked = written.as_bytes().to_vec();
    for r in refs {
        blanked[r.start..r.end].fill(b'x');
    }
    let start = written.find("://")? + 3;
    let rest = &blanked[start..];
    let authority_end = rest
        .iter()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    rest[..authority_end]
        .iter()
        .rposition(|b| *b == b'@')
        .map(|at| start + at)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::notify::email::settings::TlsMode;

    fn route(smtp_url: &str, from: &str, to: &[(&str, &str)]) -> EmailRoute {
        EmailRoute {
            smtp_url: smtp_url.into(),
            from: from.into(),
            to: to
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            approvers: None,
            events: None,
        }
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> Box<Lookup> {
        Box::new(move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn references_resolve_and_a_password_reference_may_hold_any_character() {
        let lookup = env(&[
            ("SMTP_PASSWORD", "p@ss:w/rd?#%"),
            ("MAIL_FROM", "Tollgate <tollgate@example.com>"),
            ("ALICE_MAIL", "alice@example.com"),
        ]);
        let r = route(
            "smtps://mailer:${SMTP_PASSWORD}@smtp.example.com",
            "${MAIL_FROM}",
            &[("alice", "${ALICE_MAIL}")],
        );
        let resolved = resolve(&r, "alice", &*lookup).unwrap();
        let credentials = resolved.settings.credentials.expect("credentials");
        assert_eq!(credentials.password(), "p@ss:w/rd?#%");
        assert_eq!(resolved.settings.host, "smtp.example.com");
        assert_eq!(resolved.settings.tls, TlsMode::Implicit);
        assert_eq!(resolved.from.to_string(), "Tollgate <tollgate@example.com>");
        assert_eq!(resolved.to.to_string(), "alice <alice@example.com>");
    }

    #[test]
    fn a_decider_named_by_address_needs_no_entry() {
        let r = route("smtp://h?tls=none", "t@example.com", &[]);
        let resolved = resolve(&r, "bob@example.com", &*env(&[])).unwrap();
        assert_eq!(resolved.to.to_string(), "bob@example.com");
        let err = resolve(&r, "carol", &*env(&[])).unwrap_err();
        assert!(err.contains("\"carol\" has no address"), "{err}");
    }

    #[test]
    fn errors_name_the_variable_never_its_value() {
        let r = route("${SMTP_URL}", "t@example.com", &[]);
        let err = resolve(&r, "bob@example.com", &*env(&[])).unwrap_err();
        assert!(err.contains("SMTP_URL is not set"), "{err}");

        let lookup = env(&[("SMTP_URL", "smtp://u:hunter2-secret@h:99999")]);
        let err = resolve(&r, "bob@example.com", &*lookup).unwrap_err();
        assert!(err.contains("port") && err.contains("${SMTP_URL}"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");

        let r = route("smtp://h", "${MAIL_FROM}", &[("alice", "${ALICE_MAIL}")]);
        let lookup = env(&[("MAIL_FROM", "not an address"), ("ALICE_MAIL", "")]);
        let err = resolve(&r, "alice", &*lookup).unwrap_err();
        assert!(err.contains("from is not a mail address"), "{err}");
        assert!(err.ends_with("(read from ${MAIL_FROM})"), "{err}");
        assert!(!err.contains("not an address"), "{err}");

        let lookup = env(&[("MAIL_FROM", "t@example.com"), ("ALICE_MAIL", " ")]);
        let err = resolve(&r, "alice", &*lookup).unwrap_err();
        assert!(
            err.contains("to.alice is empty (read from ${ALICE_MAIL})"),
            "{err}"
        );
    }
}

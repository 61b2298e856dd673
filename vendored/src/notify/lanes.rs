//! Delivery lanes (DESIGN §14): the outbox's notices grouped by the
//! endpoint that receives them, so a slow, hanging or failing endpoint
//! delays only its own notices. A lane is a channel and a label:
//!
//! - a webhook: its URL's `scheme://host:port` (the port written or the
//!   scheme's default), never the path or the query, which may hold a
//!   token;
//! - mail: the SMTP server's `host:port` (the port written, else 465 for
//!   `smtps://`, 587 for `smtp://`), never the user or the password;
//! - Slack: the workspace. A server holds one Slack token, so one
//!   workspace; the lane is labelled with the Slack API's `host:port`
//!   (`TOLLGATE_SLACK_API_BASE`, default `slack.com:443`), never the token.
//!
//! A label is worked out by a delivery worker, which resolves the `${NAME}`
//! references a store never does, and stored with the notice: the store
//! then leases at most [`DEFAULT_PER_LANE`] notices of a lane at once
//! across every worker sharing it. A target that cannot be resolved (an
//! unset variable, a URL that is no URL) is labelled [`UNRESOLVED`]: its
//! notices fail as misconfigured, in a lane of their own.

use crate::domain::notices::{NoticeChannel, NoticeRoutes};
use crate::support::secrets;

/// Notices of one lane sent at once, across every worker, by default.
pub const DEFAULT_PER_LANE: usize = 4;

/// Notices one worker sends at once, every lane together, by default: room
/// for several stuck lanes at their full share beside the healthy ones.
pub const DEFAULT_TOTAL: usize = 32;

/// The label of a target whose endpoint cannot be worked out.
pub const UNRESOLVED: &str = "unresolved";

/// The lane label of a notice on `channel` to `target` (as written), given
/// the routes stored with its approval. Environment variables are read
/// with `lookup` (the process environment in a worker).
pub fn label(
    channel: NoticeChannel,
    target: &str,
    routes: Option<&NoticeRoutes>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> String {
    let found = match channel {
        NoticeChannel::Webhook => routes
            .and_then(|r| r.webhooks.iter().find(|w| w.url == target))
            .and_then(|route| resolved(&route.url, lookup))
            .and_then(|url| web_origin(&url)),
        NoticeChannel::Email => routes
            .and_then(|r| r.email.as_ref())
            .and_then(|route| resolved(&route.smtp_url, lookup))
            .and_then(|url| smtp_server(&url)),
        NoticeChannel::Slack => {
            let base = lookup(crate::support::env::SLACK_API_BASE)
                .filter(|b| !b.trim().is_empty())
                .unwrap_or_else(|| crate::notify::slack::api::DEFAULT_API_BASE.to_string());
            web_origin(&base).map(|origin| {
                origin
                    .split_once("://")
                    .map_or(origin.clone(), |(_, host)| host.to_string())
            })
        }
    };
    found.unwrap_or_else(|| UNRESOLVED.to_string())
}

fn resolved(written: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    secrets::resolve_with(written, lookup)
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// `scheme://host:port` of an http(s) URL; `None` for anything else.
fn web_origin(text: &str) -> Option<String> {
    let url = url::Url::parse(text.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host()?;
    let port = url.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", url.scheme()))
}

/// `host:port` of an `smtp://` or `smtps://` URL, read without its user
/// information (a password may hold any character, `@` and `/` included,
/// so the host is what follows the last `@` of the authority).
fn smtp_server(text: &str) -> Option<String> {
    let (scheme, rest) = text.trim().split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "smtp" => 587,
        "smtps" => 465,
        _ => return None,
    };
    let authority_end = rest.rfind('@').map_or(0, |at| at + 1);
    let host_port = &rest[authority_end..];
    let host_port = host_port
        .split(['/', '?', '#'])
        .next()
        .filter(|h| !h.is_empty())?;
    let (host, port) = match host_port.strip_prefix('[') {
        Some(bracketed) => {
            let (ip, after) = bracketed.split_once(']')?;
            (format!("[{ip}]"), after.strip_prefix(':'))
        }
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (host_port.to_string(), None),
        },
    };
    let port = match port {
        Some(port) => port.parse::<u16>().ok().filter(|p| *p > 0)?,
        None => default_port,
    };
    (!host.is_empty()).then(|| format!("{}:{port}", host.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::notices::{EmailRoute, WebhookRoute};

    fn env(name: &str) -> Option<String> {
        match name {
            "HOOK" => Some("https://Hooks.Example/in/abc?token=secret-value".into()),
            "LOCAL" => Some("http://127.0.0.1:8081/hook?token=t".into()),
            "SMTP" => Some("smtp://user:p%40ss@w/rd@Mail.Example:2525?tls=required".into()),
            "SMTPS" => Some("smtps://mail.example".into()),
            _ => None,
        }
    }

    fn hooks(urls: &[&str]) -> NoticeRoutes {
        NoticeRoutes {
            webhooks: urls
                .iter()
                .map(|url| WebhookRoute {
                    url: url.to_string(),
                    secret: "${S}".into(),
                    events: None,
                })
                .collect(),
            ..NoticeRoutes::default()
        }
    }

    fn mail(smtp_url: &str) -> NoticeRoutes {
        NoticeRoutes {
            email: Some(EmailRoute {
                smtp_url: smtp_url.into(),
                from: "tollgate@example.com".into(),
                to: Default::default(),
                approvers: None,
                events: None,
            }),
            ..NoticeRoutes::default()
        }
    }

    #[test]
    fn a_webhook_lane_is_its_origin_without_path_or_query() {
        let routes = hooks(&["${HOOK}", "${LOCAL}", "http://[::1]/x"]);
        let of = |target: &str| label(NoticeChannel::Webhook, target, Some(&routes), &env);
        assert_eq!(of("${HOOK}"), "https://hooks.example:443");
        assert_eq!(of("${LOCAL}"), "http://127.0.0.1:8081");
        assert_eq!(of("http://[::1]/x"), "http://[::1]:80");
        assert_eq!(of("${GONE}"), UNRESOLVED, "not among the routes");
        let unset = hooks(&["${UNSET}", "ftp://files.example/"]);
        let of = |target: &str| label(NoticeChannel::Webhook, target, Some(&unset), &env);
        assert_eq!(of("${UNSET}"), UNRESOLVED);
        assert_eq!(of("ftp://files.example/"), UNRESOLVED);
    }

    #[test]
    fn a_mail_lane_is_its_smtp_server_without_credentials() {
        let of = |url: &str| label(NoticeChannel::Email, "ana", Some(&mail(url)), &env);
        assert_eq!(of("${SMTP}"), "mail.example:2525");
        assert_eq!(of("${SMTPS}"), "mail.example:465");
        assert_eq!(of("smtp://relay.example"), "relay.example:587");
        assert_eq!(of("smtp://[::1]:25"), "[::1]:25");
        assert_eq!(of("smtp://relay.example:0"), UNRESOLVED);
        assert_eq!(of("http://relay.example"), UNRESOLVED);
        assert_eq!(of("${UNSET}"), UNRESOLVED);
        assert_eq!(label(NoticeChannel::Email, "ana", None, &env), UNRESOLVED);
    }

    #[test]
    fn the_slack_lane_is_the_api_host() {
        assert_eq!(
            label(NoticeChannel::Slack, "#ops", None, &|_| None),
            "slack.com:443"
        );
        let stub = |name: &str| {
            (name == crate::support::env::SLACK_API_BASE)
                .then(|| "http://127.0.0.1:9000/api".to_string())
        };
        assert_eq!(
            label(NoticeChannel::Slack, "#ops", None, &stub),
            "127.0.0.1:9000"
        );
    }
}

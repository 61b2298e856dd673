use super::*;

/// Standard Webhooks' published test vector (libraries/python/tests/
/// test_webhooks.py, `test_sign_function`, in standard-webhooks/standard-webhooks).
const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const VECTOR_TIMESTAMP: i64 = 1614265330;
const VECTOR_BODY: &str = r#"{"test": 2432232314}"#;
const VECTOR_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

fn vector_secret() -> WebhookSecret {
    WebhookSecret::parse(VECTOR_SECRET).expect("the published secret parses")
}

#[test]
fn signs_the_published_test_vector() {
    let signed = signature(
        &vector_secret(),
        VECTOR_ID,
        VECTOR_TIMESTAMP,
        VECTOR_BODY.as_bytes(),
    );
    assert_eq!(signed, VECTOR_SIGNATURE);
}

#[test]
fn the_prefix_is_optional_and_padding_and_whitespace_do_not_matter() {
    let sign = |secret: &WebhookSecret| {
        signature(secret, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY.as_bytes())
    };
    let bare = VECTOR_SECRET.strip_prefix(SECRET_PREFIX).unwrap();
    for written in [bare.to_string(), format!("{VECTOR_SECRET}\n")] {
        let secret = WebhookSecret::parse(&written).expect(&written);
        assert_eq!(sign(&secret), VECTOR_SIGNATURE, "{written:?}");
    }
    // 25 bytes: padded "==" in standard base64; accepted without it too.
    let key = [7u8; 25];
    let padded = STANDARD.encode(key);
    assert!(padded.ends_with('='));
    let a = WebhookSecret::parse(&padded).unwrap();
    let b = WebhookSecret::parse(padded.trim_end_matches('=')).unwrap();
    assert_eq!(sign(&a), sign(&b));
}

#[test]
fn each_part_of_the_signed_content_counts() {
    let secret = vector_secret();
    let base = signature(&secret, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY.as_bytes());
    let changed = [
        signature(
            &secret,
            "msg_other",
            VECTOR_TIMESTAMP,
            VECTOR_BODY.as_bytes(),
        ),
        signature(
            &secret,
            VECTOR_ID,
            VECTOR_TIMESTAMP + 1,
            VECTOR_BODY.as_bytes(),
        ),
        signature(
            &secret,
            VECTOR_ID,
            VECTOR_TIMESTAMP,
            br#"{"test":2432232314}"#,
        ),
        signature(
            &WebhookSecret::parse(&STANDARD.encode([1u8; 24])).unwrap(),
            VECTOR_ID,
            VECTOR_TIMESTAMP,
            VECTOR_BODY.as_bytes(),
        ),
    ];
    for other in changed {
        assert_ne!(other, base);
        assert!(other.starts_with("v1,"), "{other}");
    }
}

#[test]
fn keys_of_24_to_64_bytes_are_taken_and_others_refused() {
    for len in [MIN_SECRET_BYTES, 32, MAX_SECRET_BYTES] {
        let written = format!("{SECRET_PREFIX}{}", STANDARD.encode(vec![9u8; len]));
        assert!(WebhookSecret::parse(&written).is_ok(), "{len}");
    }
    for len in [1, MIN_SECRET_BYTES - 1, MAX_SECRET_BYTES + 1, 200] {
        let written = STANDARD.encode(vec![9u8; len]);
        assert_eq!(
            WebhookSecret::parse(&written).unwrap_err(),
            WebhookSecretError::Length { len },
            "{len}"
        );
    }
}

#[test]
fn a_refused_secret_is_never_shown() {
    let not_base64 = "whsec_this-is-not*base64-at-all-but-a-secret";
    let short = "whsec_c2hvcnQtc2VjcmV0LXZhbHVl"; // "short-secret-value", 18 bytes
    let cases = [
        ("", WebhookSecretError::Empty),
        ("whsec_", WebhookSecretError::Empty),
        (not_base64, WebhookSecretError::NotBase64),
        // URL-safe base64 is not the standard alphabet.
        (
            "whsec_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_",
            WebhookSecretError::NotBase64,
        ),
        (short, WebhookSecretError::Length { len: 18 }),
    ];
    for (written, expected) in cases {
        let error = WebhookSecret::parse(written).unwrap_err();
        assert_eq!(error, expected, "{written:?}");
        let text = format!("{error} {error:?}");
        let body = written.strip_prefix(SECRET_PREFIX).unwrap_or(written);
        assert!(body.is_empty() || !text.contains(body), "{text}");
        assert!(!text.contains("short-secret"), "{text}");
    }
    let shown = format!("{:?}", vector_secret());
    assert!(!shown.contains("MfKQ9r8G"), "{shown}");
    assert_eq!(shown, "WebhookSecret(<redacted>)");
}

#[test]
fn only_absolute_http_urls_are_sent_to() {
    for fine in [
        "https://hooks.example.com/in?token=abc",
        "http://127.0.0.1:8080/hook",
        " https://example.com ",
    ] {
        assert!(http_url(fine).is_some(), "{fine}");
    }
    for refused in [
        "",
        "/hook",
        "hooks.example.com/in",
        "ftp://example.com/x",
        "file:///etc/passwd",
        "mailto:a@example.com",
        "https://",
    ] {
        assert!(http_url(refused).is_none(), "{refused}");
    }
}

#[test]
fn ids_are_header_safe_and_dot_free() {
    assert!(check_id("msg_p5jXN8AQM9LWM0D4loKWxJek").is_ok());
    assert!(check_id("6f1c0d1e-2b7a-4c39-9f0e-3f5b8d2a9c11").is_ok());
    for bad in ["", "a.b", "a b", "a\nb", "é", &"x".repeat(129)] {
        assert!(check_id(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn one_line_flattens_control_characters_and_runs_of_space() {
    assert_eq!(one_line("a\nb\r\n\tc  d\u{0}e "), "a b c d e");
    assert_eq!(one_line(" \n "), "");
}

#[test]
fn errors_name_a_setting_by_its_references_only() {
    assert_eq!(as_written("${HOOK_URL}"), "(${HOOK_URL})");
    assert_eq!(
        as_written("https://${HOST}/in?token=${TOKEN}"),
        "(${HOST}, ${TOKEN})"
    );
    assert_eq!(
        as_written("https://example.com/in?token=literal-token"),
        "(as written in the spec)"
    );
}

fn route(url: &str, secret: &str) -> WebhookRoute {
    WebhookRoute {
        url: url.into(),
        secret: secret.into(),
        events: None,
    }
}

fn table(pairs: &'static [(&'static str, &'static str)]) -> CallSecrets {
    CallSecrets::with_lookup(move |name| {
        pairs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    })
}

/// Misconfigured before anything is sent: these fail without a receiver.
#[tokio::test]
async fn a_route_that_cannot_resolve_is_misconfigured_and_names_only_variables() {
    const URL_VALUE: &str = "https://hooks.example.com/in?token=url-token-value";
    const SECRET_VALUE: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VALUES: &[(&str, &str)] = &[
        ("HOOK_URL", URL_VALUE),
        ("HOOK_SECRET", SECRET_VALUE),
        ("NOT_A_URL", "hooks.example.com/in?token=url-token-value"),
        ("BAD_SECRET", "whsec_bm90LWxvbmctZW5vdWdoLXRva2Vu"),
        ("BLANK", "  "),
    ];
    let sender = WebhookSender::new().unwrap();
    let cases = [
        (route("${UNSET_URL}", "${HOOK_SECRET}"), "UNSET_URL"),
        (route("${HOOK_URL}", "${UNSET_SECRET}"), "UNSET_SECRET"),
        (route("${NOT_A_URL}", "${HOOK_SECRET}"), "${NOT_A_URL}"),
        (route("${HOOK_URL}", "${BAD_SECRET}"), "${BAD_SECRET}"),
        (route("${BLANK}", "${HOOK_SECRET}"), "${BLANK}"),
        (route("${HOOK_URL}", "${BLANK}"), "${BLANK}"),
    ];
    for (route, named) in cases {
        let attempt = sender
            .deliver_with(&route, table(VALUES), "msg_1", b"{}", Utc::now())
            .await;
        let Attempt::Misconfigured { error } = attempt else {
            panic!("{route:?}: {attempt:?}");
        };
        assert!(error.contains(named), "{error}");
        assert!(error.starts_with("approvals.notify.webhooks "), "{error}");
        for (_, value) in VALUES {
            let value = value.trim();
            assert!(
                value.is_empty() || !error.contains(value),
                "{error} shows {value}"
            );
        }
        assert!(!error.contains("url-token-value") && !error.contains("MfKQ9r8G"));
    }
}

/// The environment path: a variable that is surely unset, and one that is
/// surely set but not a URL (PATH), neither shown.
#[tokio::test]
async fn deliver_resolves_from_the_environment_and_never_shows_a_value() {
    let sender = WebhookSender::new().unwrap();
    let unset = route("${TOLLGATE_TEST_WEBHOOK_URL_NEVER_SET}", "${HOOK_SECRET}");
    let attempt = sender.deliver(&unset, "msg_1", b"{}", Utc::now()).await;
    assert_eq!(
        attempt,
        Attempt::Misconfigured {
            error: "approvals.notify.webhooks url: environment variable \
                    TOLLGATE_TEST_WEBHOOK_URL_NEVER_SET is not set (referenced as \
                    ${TOLLGATE_TEST_WEBHOOK_URL_NEVER_SET})"
                .to_string()
        }
    );
    let Ok(path) = std::env::var("PATH") else {
        return;
    };
    let not_a_url = route("${PATH}", "${HOOK_SECRET}");
    let attempt = sender.deliver(&not_a_url, "msg_1", b"{}", Utc::now()).await;
    let Attempt::Misconfigured { error } = attempt else {
        panic!("{attempt:?}");
    };
    assert!(
        error.contains("${PATH}") && !error.contains(&path),
        "{error}"
    );
}

#[tokio::test]
async fn send_refuses_an_id_or_url_it_cannot_use_without_sending() {
    let sender = WebhookSender::new().unwrap();
    let secret = vector_secret();
    let dotted = sender
        .send("http://127.0.0.1:9/", &secret, "a.b", b"{}", Utc::now())
        .await;
    assert!(
        matches!(dotted, Attempt::Misconfigured { .. }),
        "{dotted:?}"
    );
    let relative = sender
        .send("/in?token=abc", &secret, "msg_1", b"{}", Utc::now())
        .await;
    let Attempt::Misconfigured { error } = relative else {
        panic!("{relative:?}");
    };
    assert!(!error.contains("token=abc"), "{error}");
}

#[test]
fn retry_after_reads_seconds_and_dates_from_now_and_is_capped() {
    let now = DateTime::parse_from_rfc3339("1994-11-06T08:49:37Z")
        .unwrap()
        .with_timezone(&Utc);
    let headers = |value: &str| {
        let mut map = HeaderMap::new();
        map.insert(RETRY_AFTER, value.parse().unwrap());
        map
    };
    assert_eq!(
        retry_after(&headers("120"), now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        retry_after(&headers("Sun, 06 Nov 1994 08:51:37 GMT"), now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        retry_after(&headers("99999999"), now),
        Some(MAX_RETRY_AFTER)
    );
    assert_eq!(retry_after(&headers("soon"), now), None);
    assert_eq!(retry_after(&HeaderMap::new(), now), None);
}

//! The WebDriver client itself, on a data: URL page: every command the
//! inbox tests use, and no browser process left behind.

use std::time::Duration;

use serde_json::json;

use crate::common::webdriver::{Driver, SessionOptions, decode_base64};

const PAGE: &str = "data:text/html;charset=utf-8,<!doctype html><title>t</title>\
<form id=f><input id=name name=name value=x><textarea id=t></textarea></form>\
<p id=out>hello <b>world</b></p><div id=wide style='width:100px'>w</div>\
<script>setTimeout(function(){var p=document.createElement('p');p.id='late';\
p.textContent='late';document.body.appendChild(p)},300)</script>";

/// Live (not zombie) processes in process group `pgid` or whose command
/// line names `profile` (Chromium's crash handler leads its own group).
fn live_processes(pgid: u32, profile: &str) -> Vec<String> {
    let out = std::process::Command::new("ps")
        .args(["-eww", "-o", "pid=,pgid=,stat=,args="])
        .output()
        .expect("ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 3
                && !f[2].starts_with('Z')
                && (f[1] == pgid.to_string() || l.contains(profile))
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_on_a_data_url_and_nothing_left_running() {
    let driver = Driver::start().await;
    let pgid = driver.pid();
    let profile;
    {
        let session = driver.session(SessionOptions::default()).await;
        profile = session.profile_dir();
        session.goto(PAGE).await;
        assert_eq!(session.title().await, "t");
        assert!(session.current_url().await.starts_with("data:text/html"));

        let input = session.find("#name").await;
        assert_eq!(input.attribute("value").await.as_deref(), Some("x"));
        input.clear().await;
        input.send_keys("Ada").await;
        assert_eq!(input.property("value").await, json!("Ada"));
        assert_eq!(input.attribute("missing").await, None);

        let out = session.find("#out").await;
        assert_eq!(out.text().await, "hello world");
        assert_eq!(out.find_all("b").await.len(), 1);
        assert_eq!(session.find_all("#out, #wide").await.len(), 2);
        assert!(session.try_find("#nothing").await.is_none());

        // Polling sees an element a script adds later.
        let late = session.wait_for("#late", Duration::from_secs(10)).await;
        assert_eq!(late.text().await, "late");

        let sum = session
            .execute(
                "return arguments[0] + arguments[1];",
                vec![json!(2), json!(3)],
            )
            .await;
        assert_eq!(sum, json!(5));
        let tag = session
            .execute("return arguments[0].tagName;", vec![out.as_arg()])
            .await;
        assert_eq!(tag, json!("P"));

        let png = session.screenshot().await;
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");

        session.set_window_size(390, 844).await;
        let width = session.inner_width().await;
        assert!(width <= 390, "phone width, got {width}");
    }
    {
        // JavaScript off: the page's script never runs, WebDriver still works.
        let session = driver
            .session(SessionOptions {
                javascript: false,
                ..SessionOptions::default()
            })
            .await;
        session.goto(PAGE).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(session.try_find("#late").await.is_none(), "no script ran");
        assert_eq!(session.find("#out").await.text().await, "hello world");
    }
    assert!(
        !live_processes(pgid, &profile).is_empty(),
        "chromedriver runs"
    );
    drop(driver);
    assert_all_gone(pgid, &profile).await;
}

/// Killed processes may take a moment to be reaped.
async fn assert_all_gone(pgid: u32, profile: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = live_processes(pgid, profile);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "processes left running: {left:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_test_leaves_no_browser_running() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let test = tokio::spawn(async move {
        let driver = Driver::start().await;
        let session = driver.session(SessionOptions::default()).await;
        session.goto(PAGE).await;
        tx.send((driver.pid(), session.profile_dir())).unwrap();
        panic!("a failing assertion");
    });
    let (pgid, profile) = rx.await.expect("the session opened");
    assert!(test.await.is_err(), "the task panicked");
    assert_all_gone(pgid, &profile).await;
}

#[test]
fn base64_decodes_like_the_standard() {
    assert_eq!(decode_base64("").unwrap(), b"");
    assert_eq!(decode_base64("Zg==").unwrap(), b"f");
    assert_eq!(decode_base64("Zm8=").unwrap(), b"fo");
    assert_eq!(decode_base64("Zm9v").unwrap(), b"foo");
    assert_eq!(decode_base64("Zm9vYmFy").unwrap(), b"foobar");
    assert_eq!(decode_base64("/+8=").unwrap(), [0xff, 0xef]);
    assert!(decode_base64("Zm9v!").is_none());
}

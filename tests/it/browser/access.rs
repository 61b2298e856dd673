//! The pages for every approver: with JavaScript off, on a phone, on a
//! server without tokens (loopback only, decisions by `local`), and from
//! the keyboard, with labels and WCAG AA contrast checked in the browser.

use tollgate_runtime::links::LinkSigner;

use crate::common::webdriver::{ENTER, Session, SessionOptions, TAB};

use super::desk::{
    Desk, LINK_SECRET, WAIT, approve_from_inbox, assert_no_horizontal_scroll, order, outcome,
    screenshot,
};

#[tokio::test(flavor = "multi_thread")]
async fn approve_and_reject_with_javascript_off() {
    let desk = Desk::start().await;
    let approve = desk.pause(order("A-5001", 44.0, "Ada Lovelace", "")).await;
    let reject = desk.pause(order("A-5002", 45.0, "Grace Hopper", "")).await;
    let session = desk
        .driver
        .session(SessionOptions {
            javascript: false,
            ..SessionOptions::default()
        })
        .await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url("/ui")).await;
    let text = approve_from_inbox(&session, &approve.key).await;
    assert!(
        text.contains("APPROVED") && text.contains("alice"),
        "{text}"
    );

    session
        .goto(&desk.url(&format!("/ui/approvals/{}", reject.key)))
        .await;
    // Without the page's script, the server checks an edited payload.
    let before = desk.stored(&reject);
    session.find("#payload-edit").await.send_keys("}").await;
    session.find("#modify-button").await.click().await;
    // The form's error slot is on the page already, hidden: wait for the
    // answer's page, where the server filled and showed it.
    let error = session.wait_for("#payload-error:not([hidden])", WAIT).await;
    assert!(error.is_displayed().await && !error.text().await.is_empty());
    assert_eq!(
        desk.stored(&reject),
        before,
        "a broken edit decides nothing"
    );
    session.find("#reason").await.send_keys("no receipt").await;
    session.find("#reject-button").await.click().await;
    let text = outcome(&session).await;
    assert!(text.contains("REJECTED"), "{text}");

    let approved = desk.record(&approve.key).await;
    assert_eq!(
        (approved["status"].as_str(), approved["decided_by"].as_str()),
        (Some("APPROVED"), Some("alice"))
    );
    let rejected = desk.record(&reject.key).await;
    assert_eq!(rejected["status"], "REJECTED");
    assert_eq!(rejected["decision_data"]["reason"], "no receipt");
    desk.run_when(&approve.run_id, "completed").await;
    desk.run_when(&reject.run_id, "rejected").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_phone_sees_every_page_without_sideways_scrolling() {
    let desk = Desk::start().await;
    let paused = desk
        .pause(order(
            "A-5003",
            129.5,
            "Ada Lovelace",
            "A long note from the customer explaining at length why the keyboard arrived with a cracked case and two missing keycaps",
        ))
        .await;
    // One decided with an edit, so the history has a row and a diff.
    let decided = desk.pause(order("A-5004", 18.0, "Grace Hopper", "")).await;
    let mut edited = desk.record(&decided.key).await["payload"].clone();
    edited["amount"] = serde_json::json!(9.0);
    let (status, body) = desk
        .api
        .post(
            &desk.url(&format!("/approvals/{}/approve", decided.key)),
            serde_json::json!({"payload": edited, "reason": "half: the box was opened"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    desk.pause(order("A-5006", 240.0, "Alan Turing", "")).await;
    let session = desk
        .driver
        .session(SessionOptions {
            window: (390, 844),
            ..SessionOptions::default()
        })
        .await;
    session.set_window_size(390, 844).await;
    desk.sign_in(&session, "alice-token", "alice").await;
    let link = LinkSigner::new(LINK_SECRET, Some(&desk.served.base))
        .expect("signer")
        .url(&paused.key, Some("bob"));
    for path in [
        "/ui",
        "/ui/history",
        &format!("/ui/approvals/{}", paused.key),
    ] {
        session.goto(&desk.url(path)).await;
        session.wait_for("#whoami", WAIT).await;
        // Unfold what is folded: the history's diff is the widest thing.
        for summary in session.find_all("details summary").await {
            summary.click().await;
        }
        assert_no_horizontal_scroll(&session, path).await;
    }
    // Approvers open links from chat and mail on their phones.
    session.goto(&link).await;
    session.wait_for("#approve-button", WAIT).await;
    assert!(session.inner_width().await <= 390);
    assert_no_horizontal_scroll(&session, "a signed link").await;
    screenshot(&session, "phone").await;

    session.find("#approve-button").await.click().await;
    let text = outcome(&session).await;
    assert!(text.contains("APPROVED"), "{text}");
    assert_no_horizontal_scroll(&session, "the outcome").await;
    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "APPROVED");
    assert_eq!(record["decided_by"], "bob", "the link's identity");
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_mode_needs_no_sign_in_and_decides_as_local() {
    let desk = Desk::start_loopback().await;
    let paused = desk.pause(order("A-5005", 27.0, "Alan Turing", "")).await;
    let session = desk.browser().await;
    session.goto(&desk.url("/ui")).await;
    let whoami = session.wait_for("#whoami", WAIT).await.text().await;
    assert!(whoami.contains("local"), "{whoami}");
    let text = approve_from_inbox(&session, &paused.key).await;
    assert!(
        text.contains("APPROVED") && text.contains("local"),
        "{text}"
    );

    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "APPROVED");
    assert_eq!(record["decided_by"], "local");
    desk.run_when(&paused.run_id, "completed").await;
}

/// What `AUDIT` finds wrong with the page in view: unlabelled controls,
/// nameless buttons, no `<main>`/`<h1>`/`lang`, text under WCAG AA contrast
/// (4.5:1, 3:1 for large text) against its effective background.
const AUDIT: &str = r#"
const problems = [];
const describe = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
  (el.name ? '[name=' + el.name + ']' : '');
if (!document.documentElement.lang) problems.push('html has no lang');
if (document.querySelectorAll('main').length !== 1) problems.push('not exactly one <main>');
if (!document.querySelector('h1')) problems.push('no <h1>');
for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
  const named = (el.labels && el.labels.length > 0) || el.getAttribute('aria-label') ||
    el.getAttribute('aria-labelledby');
  if (!named) problems.push('no label: ' + describe(el));
}
for (const el of document.querySelectorAll('button, a[href]')) {
  if (!(el.textContent.trim() || el.getAttribute('aria-label'))) {
    problems.push('no accessible name: ' + describe(el));
  }
}
const rgba = (text) => {
  const m = text.match(/rgba?\(([^)]+)\)/);
  if (!m) return [0, 0, 0, 0];
  const parts = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
  return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
};
const luminance = ([r, g, b]) => {
  const c = [r, g, b].map((v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
};
const background = (el) => {
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
    const bg = rgba(getComputedStyle(node).backgroundColor);
    if (bg[3] > 0.5) return bg;
  }
  return [255, 255, 255, 1];
};
const seen = new Set();
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let text = walker.nextNode(); text; text = walker.nextNode()) {
  const el = text.parentElement;
  if (!text.textContent.trim() || seen.has(el)) continue;
  seen.add(el);
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  if (style.visibility === 'hidden' || box.width === 0 || box.height === 0) continue;
  if (el.closest('[aria-hidden=true], .visually-hidden, .sr-only')) continue;
  const fg = rgba(style.color);
  const [l1, l2] = [luminance(fg), luminance(background(el))].sort((a, b) => b - a);
  const ratio = (l1 + 0.05) / (l2 + 0.05);
  const size = parseFloat(style.fontSize);
  const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
  if (ratio < (large ? 3 : 4.5)) {
    problems.push('contrast ' + ratio.toFixed(2) + ': ' + describe(el) + ' "' +
      text.textContent.trim().slice(0, 30) + '"');
  }
}
return problems;
"#;

/// Tab through the page: every link and control is reached by the
/// keyboard, and shows a visible focus outline when it is. (Focus starts
/// wherever the page put it, an autofocused field say, and wraps through
/// the browser's own UI once, where nothing in the page is focused.)
async fn tab_through(session: &Session, what: &str) {
    const REACHABLE: &str = "return [...document.querySelectorAll(\
        'a[href], button, input:not([type=hidden]), select, textarea, summary')]\
        .filter((el) => el.getBoundingClientRect().width > 0 && el.tabIndex >= 0).length;";
    const FOCUSED: &str = "const el = document.activeElement;\
        if (!document.hasFocus() || el === document.body) return null;\
        const s = getComputedStyle(el);\
        return [el.outerHTML.slice(0, 100), s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2];";
    let reachable = session
        .execute(REACHABLE, vec![])
        .await
        .as_u64()
        .unwrap_or(0);
    assert!(reachable > 0, "{what}: nothing to focus");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..reachable + 2 {
        session.press(TAB).await;
        let focused = session.execute(FOCUSED, vec![]).await;
        if focused.is_null() {
            continue;
        }
        let element = focused[0].as_str().unwrap_or_default().to_string();
        assert_eq!(
            focused[1], true,
            "{what}: no visible focus outline on {element}"
        );
        seen.insert(element);
    }
    assert_eq!(
        seen.len() as u64,
        reachable,
        "{what}: Tab reached {} of {reachable} controls: {seen:#?}",
        seen.len()
    );
}

async fn audit(session: &Session, what: &str) {
    let problems = session.execute(AUDIT, vec![]).await;
    let problems = problems.as_array().cloned().unwrap_or_default();
    assert!(
        problems.is_empty(),
        "{what}: accessibility problems:\n{}",
        problems
            .iter()
            .map(|p| p.as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_page_is_labelled_high_contrast_and_works_from_the_keyboard() {
    let desk = Desk::start().await;
    let paused = desk
        .pause(order("A-6001", 42.0, "Ada Lovelace", "Keyboard only"))
        .await;
    let session = desk.browser().await;
    session.goto(&desk.url("/ui/login")).await;
    session.wait_for("#token", WAIT).await;
    audit(&session, "/ui/login").await;
    tab_through(&session, "/ui/login").await;
    desk.sign_in(&session, "alice-token", "alice").await;
    for path in [
        "/ui".to_string(),
        "/ui/history".to_string(),
        "/ui/runs".to_string(),
        format!("/ui/runs/{}", paused.run_id),
        format!("/ui/approvals/{}", paused.key),
    ] {
        session.goto(&desk.url(&path)).await;
        session.wait_for("#whoami", WAIT).await;
        audit(&session, &path).await;
        tab_through(&session, &path).await;
    }
    // Keyboard only: the reason typed into its field, the reject button
    // pressed with Enter (WebDriver focuses each element before typing).
    session
        .find("#reason")
        .await
        .send_keys("not without a receipt")
        .await;
    session.find("#reject-button").await.send_keys(ENTER).await;
    let text = outcome(&session).await;
    assert!(text.contains("REJECTED"), "{text}");
    audit(&session, "the outcome").await;
    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "REJECTED");
    assert_eq!(record["decision_data"]["reason"], "not without a receipt");
}

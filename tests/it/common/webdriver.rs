//! A small W3C WebDriver client for the browser tests: it starts Debian's
//! `chromedriver` on a free loopback port, opens headless Chromium sessions
//! through it and drives them over reqwest. Dropping a [`Session`] deletes
//! it (Chromium quits); dropping the last handle on the driver kills
//! chromedriver's whole process group, so no browser outlives a test, even
//! one that panicked.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The W3C element reference key in JSON answers.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long one command may take; Chromium on a busy 2-core machine can
/// take seconds to start or load a page.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A running chromedriver. Clone it to open more sessions on it.
#[derive(Clone)]
pub struct Driver {
    process: Arc<DriverProcess>,
    http: reqwest::Client,
}

struct DriverProcess {
    child: Mutex<Child>,
    port: u16,
}

impl Drop for DriverProcess {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        // chromedriver leads its own process group (see Driver::start), and
        // Chromium and its helpers inherit it: one signal ends them all.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// What a session's browser may do.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// `false` starts Chromium with JavaScript disabled.
    pub javascript: bool,
    /// Window size in CSS pixels.
    pub window: (u32, u32),
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            javascript: true,
            window: (1280, 900),
        }
    }
}

impl Driver {
    /// Start chromedriver. Fails the test, naming the Debian packages, when
    /// Chromium or ChromeDriver is not installed: these tests never skip.
    pub async fn start() -> Driver {
        for (binary, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(binary).exists(),
                "{binary} is missing: the browser tests need Debian's `chromium` and \
                 `chromium-driver` packages, which scripts/test installs (apt-get install \
                 chromium chromium-driver); `{package}` provides this one"
            );
        }
        let http = reqwest::Client::builder()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .expect("http client");
        // A port can be taken between probing and chromedriver's bind: try
        // a few.
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}"));
            let process = Arc::new(DriverProcess {
                child: Mutex::new(child),
                port,
            });
            let driver = Driver {
                process,
                http: http.clone(),
            };
            match driver.wait_ready(Duration::from_secs(20)).await {
                Ok(()) => return driver,
                // Dropping this driver kills the process that failed.
                Err(e) => last_error = e,
            }
        }
        panic!("chromedriver did not become ready: {last_error}");
    }

    /// chromedriver's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.process.child.lock().unwrap().id()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.process.port, path)
    }

    async fn wait_ready(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.process.child.lock().unwrap().try_wait().ok().flatten() {
                return Err(format!("chromedriver exited: {status}"));
            }
            if let Ok(response) = self.http.get(self.url("/status")).send().await
                && let Ok(body) = response.json::<Value>().await
                && body["value"]["ready"] == true
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no ready /status within {within:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless Chromium session with a fresh profile.
    pub async fn session(&self, options: SessionOptions) -> Session {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ]
        .map(str::to_string)
        .to_vec();
        args.push(format!(
            "--window-size={},{}",
            options.window.0, options.window.1
        ));
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let mut chrome = json!({ "binary": CHROMIUM, "args": args });
        if !options.javascript {
            // The content setting, as a policy would set it: pages run no
            // script at all. (WebDriver's own commands still work: they go
            // through DevTools, not the page's script permission.)
            chrome["prefs"] = json!({ "profile.managed_default_content_settings.javascript": 2 });
        }
        let body = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": chrome,
                "unhandledPromptBehavior": "dismiss",
            }}
        });
        let value = command(
            &self.http,
            reqwest::Method::POST,
            &self.url("/session"),
            Some(body),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot open a Chromium session: {e}"));
        let id = value["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no sessionId in {value}"))
            .to_string();
        Session {
            driver: self.clone(),
            id,
            profile,
        }
    }
}

/// One browser (window) driven over WebDriver.
pub struct Session {
    driver: Driver,
    id: String,
    profile: tempfile::TempDir,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Drop cannot await, and it may run while a panic unwinds inside the
        // test's runtime: a plain blocking request on a std socket.
        let _ = blocking_delete(self.driver.process.port, &format!("/session/{}", self.id));
    }
}

/// A W3C error answer, or a transport failure.
#[derive(Debug)]
pub struct WebDriverError {
    /// The W3C error code ("no such element", ...), or "transport".
    pub error: String,
    pub message: String,
}

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.message)
    }
}

async fn command(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, WebDriverError> {
    let transport = |e: reqwest::Error| WebDriverError {
        error: "transport".into(),
        message: e.to_string(),
    };
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.map_err(transport)?;
    let ok = response.status().is_success();
    let body: Value = response.json().await.map_err(transport)?;
    let value = body.get("value").cloned().unwrap_or(Value::Null);
    if ok {
        Ok(value)
    } else {
        Err(WebDriverError {
            error: value["error"].as_str().unwrap_or("unknown error").into(),
            message: value["message"].as_str().unwrap_or("").into(),
        })
    }
}

impl Session {
    /// The session's Chromium profile directory (fresh, deleted on drop).
    pub fn profile_dir(&self) -> String {
        self.profile.path().display().to_string()
    }

    fn url(&self, path: &str) -> String {
        self.driver.url(&format!("/session/{}{}", self.id, path))
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, WebDriverError> {
        command(&self.driver.http, method, &self.url(path), body).await
    }

    async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None)
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body))
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// Navigate and wait for the page to load.
    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({ "url": url })).await;
    }

    /// Press and release `key` (a WebDriver key code such as `TAB`) on
    /// whatever has the focus, as a person at a keyboard would.
    pub async fn press(&self, key: &str) {
        let actions = json!({"actions": [{
            "type": "key",
            "id": "keyboard",
            "actions": [{"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}],
        }]});
        self.post("/actions", actions).await;
    }

    pub async fn current_url(&self) -> String {
        self.get("/url").await.as_str().unwrap_or("").to_string()
    }

    pub async fn title(&self) -> String {
        self.get("/title").await.as_str().unwrap_or("").to_string()
    }

    /// The page's current DOM as HTML (for failure messages).
    pub async fn source(&self) -> String {
        self.get("/source").await.as_str().unwrap_or("").to_string()
    }

    /// The first element matching `css`, or `None`.
    pub async fn try_find(&self, css: &str) -> Option<Element<'_>> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        match found {
            Ok(value) => Some(self.element(&value)),
            Err(e) if e.error == "no such element" => None,
            Err(e) => panic!("find {css:?}: {e}"),
        }
    }

    /// The first element matching `css`; fails the test, showing the page,
    /// when there is none.
    pub async fn find(&self, css: &str) -> Element<'_> {
        match self.try_find(css).await {
            Some(element) => element,
            None => panic!(
                "no element {css:?} on {}:\n{}",
                self.current_url().await,
                self.source().await
            ),
        }
    }

    pub async fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let value = self
            .post(
                "/elements",
                json!({ "using": "css selector", "value": css }),
            )
            .await;
        value
            .as_array()
            .map(|all| all.iter().map(|v| self.element(v)).collect())
            .unwrap_or_default()
    }

    fn element(&self, value: &Value) -> Element<'_> {
        Element {
            session: self,
            id: value[ELEMENT_KEY]
                .as_str()
                .unwrap_or_else(|| panic!("not an element reference: {value}"))
                .to_string(),
        }
    }

    /// Poll for an element matching `css` until `timeout`; fails the test,
    /// showing the page, when none appeared.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Element<'_> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(element) = self.try_find(css).await {
                return element;
            }
            if Instant::now() >= deadline {
                panic!(
                    "no element {css:?} within {timeout:?} on {}:\n{}",
                    self.current_url().await,
                    self.source().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Poll until no element matches `css` (fails the test after `timeout`).
    pub async fn wait_gone(&self, css: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.try_find(css).await.is_some() {
            if Instant::now() >= deadline {
                panic!(
                    "{css:?} still on the page after {timeout:?}:\n{}",
                    self.source().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Run `script` (a function body; `arguments[i]` are `args`) in the page
    /// and return what it returns.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.post("/execute/sync", json!({ "script": script, "args": args }))
            .await
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let encoded = self.get("/screenshot").await;
        decode_base64(encoded.as_str().expect("screenshot is a base64 string"))
            .expect("screenshot is valid base64")
    }

    /// Resize the window (outer size, in CSS pixels).
    pub async fn set_window_size(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({ "width": width, "height": height }))
            .await;
    }

    /// The viewport's inner width, as scripts see it.
    pub async fn inner_width(&self) -> u64 {
        self.execute("return window.innerWidth;", vec![])
            .await
            .as_u64()
            .expect("a width")
    }
}

/// An element on a session's current page.
pub struct Element<'s> {
    session: &'s Session,
    id: String,
}

impl Element<'_> {
    fn path(&self, tail: &str) -> String {
        format!("/element/{}{}", self.id, tail)
    }

    pub async fn click(&self) {
        self.session.post(&self.path("/click"), json!({})).await;
    }

    /// Type `text` into the element (it gets the focus first).
    pub async fn send_keys(&self, text: &str) {
        self.session
            .post(&self.path("/value"), json!({ "text": text }))
            .await;
    }

    pub async fn clear(&self) {
        self.session.post(&self.path("/clear"), json!({})).await;
    }

    /// The rendered (visible) text.
    pub async fn text(&self) -> String {
        let value = self.session.get(&self.path("/text")).await;
        value.as_str().unwrap_or("").to_string()
    }

    /// The attribute `name`, or `None` when the element has none.
    pub async fn attribute(&self, name: &str) -> Option<String> {
        let value = self
            .session
            .get(&self.path(&format!("/attribute/{name}")))
            .await;
        value.as_str().map(str::to_string)
    }

    /// The DOM property `name` (a textarea's current `value`, ...).
    pub async fn property(&self, name: &str) -> Value {
        self.session
            .get(&self.path(&format!("/property/{name}")))
            .await
    }

    pub async fn is_displayed(&self) -> bool {
        self.session.get(&self.path("/displayed")).await == true
    }

    /// Elements matching `css` inside this one.
    pub async fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let value = self
            .session
            .post(
                &self.path("/elements"),
                json!({ "using": "css selector", "value": css }),
            )
            .await;
        value
            .as_array()
            .map(|all| all.iter().map(|v| self.session.element(v)).collect())
            .unwrap_or_default()
    }

    /// The element as a script argument (`arguments[i]` in [`Session::execute`]).
    pub fn as_arg(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }
}

/// A loopback port nobody listens on right now.
/// WebDriver key codes for [`Session::press`].
pub const TAB: &str = "\u{E004}";
pub const ENTER: &str = "\u{E007}";

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `DELETE path` on loopback `port`, by hand over a std socket.
fn blocking_delete(port: u16, path: &str) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "DELETE {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    // Read the head and a Content-Length body: chromedriver answers once
    // Chromium quit, and may keep the socket open after that.
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        answer.extend_from_slice(&buf[..n]);
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if answer.len() >= end + 4 + length {
                return Ok(());
            }
        }
    }
}

/// Standard base64 (with or without padding) to bytes: the screenshot
/// encoding. Whitespace (a wrapped encoding) is skipped.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::alphabet::STANDARD;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    LENIENT.decode(compact).ok()
}

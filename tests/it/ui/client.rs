//! A cookie-keeping HTTP client for the inbox's pages: no redirects
//! followed (the tests look at each 303), forms posted urlencoded, and
//! the values the pages hold (CSRF tokens, ids) read out of the HTML.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::common::server::Served;

/// One answer: status, headers, body text.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn location(&self) -> &str {
        self.header("location")
    }

    /// The value of the first hidden `csrf` field.
    pub fn csrf(&self) -> String {
        attr_after(&self.body, "name=\"csrf\" value=\"").unwrap_or_else(|| {
            panic!("no csrf field in:\n{}", self.body);
        })
    }

    /// Whether an element with this id is on the page.
    pub fn has_id(&self, id: &str) -> bool {
        self.body.contains(&format!("id=\"{id}\""))
    }

    /// The text of the element with this id, tags stripped (up to its
    /// closing tag of the same name).
    pub fn text_of(&self, id: &str) -> String {
        let marker = format!("id=\"{id}\"");
        let at = self
            .body
            .find(&marker)
            .unwrap_or_else(|| panic!("no #{id} in:\n{}", self.body));
        let open = self.body[..at].rfind('<').expect("tag start");
        let tag: String = self.body[open + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let close = format!("</{tag}>");
        let start = at + self.body[at..].find('>').expect("tag end") + 1;
        let end = start + self.body[start..].find(&close).unwrap_or(0);
        strip_tags(&self.body[start..end])
    }
}

fn attr_after(html: &str, marker: &str) -> Option<String> {
    let at = html.find(marker)? + marker.len();
    let end = html[at..].find('"')?;
    Some(html[at..at + end].to_string())
}

/// Text without tags, whitespace collapsed.
pub fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A browser without JavaScript: keeps cookies per name, sends them back.
pub struct Client {
    http: reqwest::Client,
    pub base: String,
    pub cookies: BTreeMap<String, String>,
    /// Extra headers sent with every request (Origin, Host, ...).
    pub extra: Vec<(String, String)>,
}

impl Client {
    pub fn new(served: &Served) -> Client {
        Client::from_address(served, None)
    }

    /// A client whose connections come from `local` (any 127.x.y.z reaches
    /// a server on 127.0.0.1 over loopback): another client address, as
    /// the server's per-address throttles see it.
    pub fn from_address(served: &Served, local: Option<std::net::IpAddr>) -> Client {
        Client {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(60))
                .local_address(local)
                .build()
                .expect("client"),
            base: served.base.clone(),
            cookies: BTreeMap::new(),
            extra: Vec::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Answer {
        let mut request = request;
        if !self.cookies.is_empty() {
            request = request.header("cookie", self.cookie_header());
        }
        for (k, v) in &self.extra {
            request = request.header(k.as_str(), v.as_str());
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        for value in headers.get_all("set-cookie") {
            let text = value.to_str().expect("ascii cookie");
            let pair = text.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if text.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        let body = response.text().await.expect("body");
        Answer {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&mut self, path: &str) -> Answer {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    /// `method` with no body (a method a page may not answer).
    pub async fn call(&mut self, method: reqwest::Method, path: &str) -> Answer {
        let request = self.http.request(method, format!("{}{path}", self.base));
        self.send(request).await
    }

    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Answer {
        let body = serde_urlencoded_pairs(fields);
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(request).await
    }

    /// Sign in with `token` through the login form; the answer to the POST.
    pub async fn sign_in(&mut self, token: &str) -> Answer {
        let form = self.get("/ui/login").await;
        assert_eq!(form.status, 200, "{}", form.body);
        let csrf = form.csrf();
        self.post(
            "/ui/login",
            &[("token", token), ("csrf", &csrf), ("next", "/ui")],
        )
        .await
    }

    /// A signed-in client (asserting the sign-in worked).
    pub async fn signed_in(served: &Served, token: &str) -> Client {
        let mut client = Client::new(served);
        let answer = client.sign_in(token).await;
        assert_eq!(answer.status, 303, "{}", answer.body);
        assert!(client.cookies.contains_key("tollgate_session"));
        client
    }
}

/// `a=1&b=2`, each value percent-encoded.
fn serde_urlencoded_pairs(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

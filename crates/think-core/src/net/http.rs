//! An [`HttpClient`] that applies a [`NetPolicy`] to every request and to every redirect hop,
//! so a public server cannot bounce the agent to an internal address with a `302`.

use std::rc::Rc;

use async_trait::async_trait;

use super::{check_parsed, check_url, NetPolicy, Url};
use crate::platform::{HttpClient, HttpError, HttpRequest, HttpResponse, Redirect};

/// Redirects followed per request, as `fetch` does.
pub const MAX_REDIRECTS: usize = 20;

/// Checks each URL, then fetches it through `inner` with redirects handed back, and follows
/// them itself (method and body rules as `fetch`), checking each `Location` first.
pub struct GuardedHttp {
    inner: Rc<dyn HttpClient>,
    policy: NetPolicy,
}

impl GuardedHttp {
    /// `inner`, restricted to what `policy` allows.
    pub fn new(inner: Rc<dyn HttpClient>, policy: NetPolicy) -> Self {
        GuardedHttp { inner, policy }
    }
}

fn refused(e: super::NetError) -> HttpError {
    HttpError::Refused(e.to_string())
}

#[async_trait(?Send)]
impl HttpClient for GuardedHttp {
    async fn fetch(&self, mut req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let mut url = check_url(&req.url, &self.policy).map_err(refused)?;
        for _ in 0..=MAX_REDIRECTS {
            req.url = url.to_string();
            req.redirect = Redirect::Manual;
            let resp = self.inner.fetch(req.clone()).await?;
            if !matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
                return Ok(resp);
            }
            let Some(location) = resp.header("location") else { return Ok(resp) };
            let mut next = url.join(location).map_err(|e| {
                HttpError::Redirect(format!("{url} redirected to an invalid URL {location:?}: {e}"))
            })?;
            check_parsed(&mut next, &self.policy)
                .map_err(|e| HttpError::Refused(format!("{url} redirected to {next}: {e}")))?;
            rewrite_for_redirect(&mut req, resp.status, &url, &next);
            url = next;
        }
        Err(HttpError::Redirect(format!("{url}: more than {MAX_REDIRECTS} redirects")))
    }
}

/// What `fetch` changes when it follows a redirect: 303 (and 301/302 after a POST) become a
/// GET without body, and credentials are not sent to another origin.
fn rewrite_for_redirect(req: &mut HttpRequest, status: u16, from: &Url, to: &Url) {
    let to_get = (status == 303 && req.method != "HEAD")
        || (matches!(status, 301 | 302) && req.method.eq_ignore_ascii_case("POST"));
    if to_get {
        req.method = "GET".into();
        req.body = None;
        req.headers.retain(|(k, _)| {
            !["content-type", "content-length", "content-encoding", "content-language"]
                .iter()
                .any(|h| k.eq_ignore_ascii_case(h))
        });
    }
    if from.origin() != to.origin() {
        req.headers.retain(|(k, _)| {
            !["authorization", "cookie", "proxy-authorization"]
                .iter()
                .any(|h| k.eq_ignore_ascii_case(h))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::cell::RefCell;

    /// Answers each URL with a scripted status and `Location`, and records what it was sent.
    #[derive(Default)]
    struct Redirecting {
        routes: Vec<(&'static str, u16, Option<&'static str>)>,
        seen: RefCell<Vec<HttpRequest>>,
    }

    #[async_trait(?Send)]
    impl HttpClient for Redirecting {
        async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
            assert_eq!(req.redirect, Redirect::Manual, "redirects must come back to the guard");
            self.seen.borrow_mut().push(req.clone());
            let (_, status, location) =
                self.routes
                    .iter()
                    .find(|(u, ..)| *u == req.url)
                    .copied()
                    .ok_or_else(|| HttpError::Connect(format!("no route to {}", req.url)))?;
            let headers =
                location.map(|l| ("Location".to_owned(), l.to_owned())).into_iter().collect();
            Ok(HttpResponse { status, headers, body: futures::stream::empty().boxed_local() })
        }
    }

    fn guarded(
        routes: Vec<(&'static str, u16, Option<&'static str>)>,
    ) -> (Rc<Redirecting>, GuardedHttp) {
        let inner = Rc::new(Redirecting { routes, ..Default::default() });
        (inner.clone(), GuardedHttp::new(inner, NetPolicy::default()))
    }

    fn post(url: &str) -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            url: url.into(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("Authorization".into(), "Bearer t".into()),
            ],
            body: Some(b"{}".to_vec().into()),
            ..Default::default()
        }
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }

    #[test]
    fn a_redirect_to_a_private_address_is_refused_before_it_is_fetched() {
        let (inner, http) =
            guarded(vec![("https://mcp.example.com/mcp", 302, Some("http://0xa9fea9fe/latest"))]);
        let Err(HttpError::Refused(why)) = run(http.fetch(post("https://mcp.example.com/mcp")))
        else {
            panic!("expected a refusal")
        };
        assert_eq!(
            why,
            "https://mcp.example.com/mcp redirected to http://169.254.169.254/latest: \
             169.254.169.254 is a link-local address"
        );
        assert_eq!(inner.seen.borrow().len(), 1);
    }

    #[test]
    fn the_first_url_is_checked_too() {
        let (inner, http) = guarded(vec![]);
        let result = run(http.fetch(post("http://10.1/")));
        assert!(matches!(result, Err(HttpError::Refused(_))));
        assert!(inner.seen.borrow().is_empty());
    }

    #[test]
    fn allowed_redirects_are_followed_as_fetch_would() {
        let (inner, http) = guarded(vec![
            ("https://a.example/mcp", 307, Some("/v2/mcp")),
            ("https://a.example/v2/mcp", 308, Some("https://b.example/mcp")),
            ("https://b.example/mcp", 303, Some("/done")),
            ("https://b.example/done", 200, None),
        ]);
        let resp = run(http.fetch(post("https://a.example/mcp"))).unwrap();
        assert_eq!(resp.status, 200);
        let seen = inner.seen.borrow();
        let hops: Vec<(&str, &str, bool, bool)> = seen
            .iter()
            .map(|r| {
                let auth = r.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
                (r.method.as_str(), r.url.as_str(), r.body.is_some(), auth)
            })
            .collect();
        assert_eq!(
            hops,
            [
                ("POST", "https://a.example/mcp", true, true),
                ("POST", "https://a.example/v2/mcp", true, true),
                ("POST", "https://b.example/mcp", true, false),
                ("GET", "https://b.example/done", false, false),
            ]
        );
    }

    #[test]
    fn redirect_loops_end() {
        let (inner, http) = guarded(vec![("https://a.example/x", 302, Some("/x"))]);
        let result = run(
            http.fetch(HttpRequest { url: "https://a.example/x".into(), ..Default::default() })
        );
        assert!(matches!(result, Err(HttpError::Redirect(_))), "{:?}", result.err());
        assert_eq!(inner.seen.borrow().len(), MAX_REDIRECTS + 1);
    }
}

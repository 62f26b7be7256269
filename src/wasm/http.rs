//! `HttpClient` over the Workers `fetch`, streaming the response body as it arrives.

use async_trait::async_trait;
use futures::StreamExt;
use worker::{Fetch, Headers, Method, Request, RequestInit, RequestRedirect};

use crate::platform::{HttpClient, HttpError, HttpRequest, HttpResponse, Redirect};

/// The Worker's `fetch`, as the agent's [`HttpClient`].
pub struct FetchHttp;

#[async_trait(?Send)]
impl HttpClient for FetchHttp {
    async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let err = |e: worker::Error| HttpError::Request(e.to_string());
        let headers = Headers::new();
        for (k, v) in &req.headers {
            headers.append(k, v).map_err(err)?;
        }
        let mut init = RequestInit::new();
        init.with_method(Method::from(req.method.to_uppercase())).with_headers(headers);
        if req.redirect == Redirect::Manual {
            init.with_redirect(RequestRedirect::Manual);
        }
        if let Some(body) = req.body {
            let array = js_sys::Uint8Array::from(body.as_slice());
            init.with_body(Some(array.into()));
        }
        let request = Request::new_with_init(&req.url, &init).map_err(err)?;
        let mut response =
            Fetch::Request(request).send().await.map_err(|e| HttpError::Connect(e.to_string()))?;
        let status = response.status_code();
        let headers: Vec<(String, String)> = response.headers().entries().collect();
        let body = match response.stream() {
            Ok(stream) => {
                stream.map(|c| c.map_err(|e| HttpError::Body(e.to_string()))).boxed_local()
            }
            Err(_) => futures::stream::empty().boxed_local(),
        };
        Ok(HttpResponse { status, headers, body })
    }
}

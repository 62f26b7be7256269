//! `HttpClient` over the Workers `fetch`, streaming the response body as it arrives.
//!
//! Neither direction leaves a copy of a large body behind in the JS heap: the request body
//! goes from its pieces in wasm memory into a `Blob` (copied once, by the runtime, outside
//! the heap), and the response is read with a BYOB reader into one reused buffer, so a long
//! model answer (a tool call carrying a whole file) is not a trail of fresh buffers awaiting
//! the garbage collector.

use async_trait::async_trait;
use futures::StreamExt;
use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::{Fetch, Headers, Method, Request, RequestInit, RequestRedirect};

use think_core::platform::{
    HttpClient, HttpError, HttpRequest, HttpResponse, Redirect, RequestBody,
};

#[wasm_bindgen(inline_js = r#"
// A response body's reader, as a function that resolves to the next chunk (a Uint8Array) or
// to undefined at the end; null without a body. BYOB into one buffer where the stream
// supports it (a fetch body does): a read hands the buffer back transferred (the same
// memory), and the next read reuses it. Else the default reader.
export function bodyReader(response) {
  const body = response.body;
  if (!body) return null;
  let reader;
  let buffer = null;
  try {
    reader = body.getReader({ mode: "byob" });
    buffer = new ArrayBuffer(65536);
  } catch {
    reader = body.getReader();
  }
  return async () => {
    if (buffer === null) {
      const { done, value } = await reader.read();
      return done ? undefined : value;
    }
    const { done, value } = await reader.read(new Uint8Array(buffer));
    if (done) return undefined;
    buffer = value.buffer;
    return value;
  };
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = bodyReader)]
    fn body_reader(response: &JsValue) -> JsValue;
}

/// The Worker's `fetch`, as the agent's [`HttpClient`].
pub struct FetchHttp;

/// A `Blob` of the body's pieces, each read in place from wasm memory and freed once the
/// runtime has copied it.
fn blob_of(body: RequestBody) -> Result<JsValue, JsValue> {
    let pieces = body.into_pieces();
    let parts = Array::new();
    for piece in &pieces {
        // SAFETY: the views are only read by the `Blob` constructor below, which copies
        // them; nothing allocates in wasm memory (which could grow it and detach them)
        // between their creation and that call, and `pieces` outlives both.
        let view: JsValue = unsafe { Uint8Array::view(piece) }.into();
        parts.push(&view);
    }
    let ctor = js_sys::Reflect::get(&js_sys::global(), &"Blob".into())?;
    let blob = js_sys::Reflect::construct(&ctor.into(), &Array::of1(&parts))?;
    drop(pieces);
    Ok(blob)
}

#[async_trait(?Send)]
impl HttpClient for FetchHttp {
    async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let err = |e: worker::Error| HttpError::Request(e.to_string());
        let headers = Headers::new();
        for (k, v) in &req.headers {
            headers.append(k, v).map_err(err)?;
        }
        let mut init = RequestInit::new();
        // `Method::from` matches the name ASCII-case-insensitively (a method is an ASCII token).
        init.with_method(Method::from(req.method.clone())).with_headers(headers);
        if req.redirect == Redirect::Manual {
            init.with_redirect(RequestRedirect::Manual);
        }
        if let Some(body) = req.body {
            let blob = blob_of(body).map_err(|e| HttpError::Request(format!("{e:?}")))?;
            init.with_body(Some(blob));
        }
        let request = Request::new_with_init(&req.url, &init).map_err(err)?;
        let response =
            Fetch::Request(request).send().await.map_err(|e| HttpError::Connect(e.to_string()))?;
        let status = response.status_code();
        let headers: Vec<(String, String)> = response.headers().entries().collect();
        let raw: JsValue = web_sys::Response::from(&response).into();
        let next = body_reader(&raw);
        if next.is_null() {
            return Ok(HttpResponse {
                status,
                headers,
                body: futures::stream::empty().boxed_local(),
            });
        }
        let next: js_sys::Function = next.unchecked_into();
        let body = futures::stream::unfold(Some(next), |next| async move {
            let next = next?;
            let read = match next.call0(&JsValue::NULL) {
                Ok(promise) => JsFuture::from(js_sys::Promise::from(promise)).await,
                Err(e) => Err(e),
            };
            match read {
                Ok(v) if v.is_undefined() => None,
                Ok(v) => Some((Ok(Uint8Array::from(v).to_vec()), Some(next))),
                Err(e) => Some((Err(HttpError::Body(super::rpc::js_error_text(&e))), None)),
            }
        });
        Ok(HttpResponse { status, headers, body: body.boxed_local() })
    }
}

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
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use worker::{Fetch, Headers, Method, Request, RequestInit, RequestRedirect};

use crate::platform::{HttpClient, HttpError, HttpRequest, HttpResponse, Redirect, RequestBody};

#[wasm_bindgen(inline_js = r#"
// A response body's reader: BYOB into one buffer where the stream supports it (a fetch
// body does), else the default reader.
export function openBody(response) {
  const body = response.body;
  if (!body) return null;
  try {
    return { reader: body.getReader({ mode: "byob" }), buffer: new ArrayBuffer(65536) };
  } catch {
    return { reader: body.getReader(), buffer: null };
  }
}
// The next chunk as a Uint8Array, or undefined at the end. A BYOB read hands the buffer back
// transferred (the same memory), and the next read reuses it.
export async function readBody(state) {
  if (state.buffer === null) {
    const { done, value } = await state.reader.read();
    return done ? undefined : value;
  }
  const { done, value } = await state.reader.read(new Uint8Array(state.buffer));
  if (done) return undefined;
  state.buffer = value.buffer;
  return value;
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = openBody)]
    fn open_body(response: &JsValue) -> JsValue;
    #[wasm_bindgen(js_name = readBody)]
    fn read_body(state: &JsValue) -> js_sys::Promise;
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
        init.with_method(Method::from(req.method.to_uppercase())).with_headers(headers);
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
        let state = open_body(&raw);
        if state.is_null() {
            return Ok(HttpResponse {
                status,
                headers,
                body: futures::stream::empty().boxed_local(),
            });
        }
        let body = futures::stream::unfold(Some(state), |state| async move {
            let s = state?;
            match JsFuture::from(read_body(&s)).await {
                Ok(v) if v.is_undefined() => None,
                Ok(v) => Some((Ok(Uint8Array::from(v).to_vec()), Some(s))),
                Err(e) => Some((Err(HttpError::Body(format!("{e:?}"))), None)),
            }
        });
        Ok(HttpResponse { status, headers, body: body.boxed_local() })
    }
}

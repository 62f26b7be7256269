//! `BlobStore` over an R2 bucket binding.
//!
//! A put copies the bytes once, from wasm memory straight into the JavaScript buffer R2
//! reads (the `worker` crate's builder would take an owned `Vec` and copy it again), and a
//! get copies R2's buffer once into the `Vec` it returns.

use async_trait::async_trait;
use js_sys::{Function, Object, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::Bucket;

use think_core::store::{BlobStore, StoreError};

/// The workspace's blob store over the `WORKSPACE_R2` bucket.
pub struct R2Blobs(pub Bucket);

fn err(e: worker::Error) -> StoreError {
    StoreError::Blob(format!("R2: {e}"))
}

fn js_err(e: JsValue) -> StoreError {
    let msg = Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string());
    StoreError::Blob(format!(
        "R2: {}",
        msg.or_else(|| e.as_string()).unwrap_or_else(|| format!("{e:?}"))
    ))
}

#[async_trait(?Send)]
impl BlobStore for R2Blobs {
    async fn put(&self, key: &str, bytes: &[u8], content_type: &str) -> Result<(), StoreError> {
        let bucket: &JsValue = self.0.as_ref();
        let put: Function = Reflect::get(bucket, &"put".into()).map_err(js_err)?.unchecked_into();
        // A view of the bytes in wasm memory, not a copy in the JS heap: R2 reads them while
        // `bytes` stays borrowed, for the whole put.
        // SAFETY: nothing allocates between here and the call that takes the view, so it
        // cannot be detached by a memory growth before R2 has it.
        let body = unsafe { Uint8Array::view(bytes) };
        let metadata = Object::new();
        Reflect::set(&metadata, &"contentType".into(), &content_type.into()).map_err(js_err)?;
        let options = Object::new();
        Reflect::set(&options, &"httpMetadata".into(), &metadata).map_err(js_err)?;
        let promise = put.call3(bucket, &key.into(), &body, &options).map_err(js_err)?;
        JsFuture::from(js_sys::Promise::from(promise)).await.map_err(js_err)?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(object) = self.0.get(key).execute().await.map_err(err)? else { return Ok(None) };
        match object.body() {
            Some(body) => body.bytes().await.map(Some).map_err(err),
            None => Ok(Some(Vec::new())),
        }
    }

    async fn delete(&self, keys: &[String]) -> Result<(), StoreError> {
        // R2 deletes at most 1,000 keys per call.
        for chunk in keys.chunks(1000) {
            self.0.delete_multiple(chunk.to_vec()).await.map_err(err)?;
        }
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut req = self.0.list().prefix(prefix);
            if let Some(c) = cursor.take() {
                req = req.cursor(c);
            }
            let page = req.execute().await.map_err(err)?;
            keys.extend(page.objects().iter().map(|o| o.key()));
            if !page.truncated() {
                return Ok(keys);
            }
            cursor = page.cursor();
        }
    }
}

//! `BlobStore` over an R2 bucket binding.

use async_trait::async_trait;
use worker::{Bucket, HttpMetadata};

use crate::store::{BlobStore, StoreError};

pub struct R2Blobs(pub Bucket);

fn err(e: worker::Error) -> StoreError {
    StoreError::Blob(format!("R2: {e}"))
}

#[async_trait(?Send)]
impl BlobStore for R2Blobs {
    async fn put(&self, key: &str, bytes: Vec<u8>, content_type: &str) -> Result<(), StoreError> {
        self.0
            .put(key, bytes)
            .http_metadata(HttpMetadata {
                content_type: Some(content_type.to_owned()),
                ..Default::default()
            })
            .execute()
            .await
            .map(|_| ())
            .map_err(err)
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

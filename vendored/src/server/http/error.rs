//! An [`ApiError`] as an HTTP response: its status, the JSON body
//! `{"error": {"code": "...", "message": "..."}}`, and the headers some
//! refusals carry.

use axum::Json;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::service::{ApiError, BUSY_RETRY_AFTER_SECS};

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        match self {
            ApiError::Unauthorized => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::StoreBusy(_) => {
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(BUSY_RETRY_AFTER_SECS),
                );
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;
    use axum::http::StatusCode;

    #[test]
    fn only_a_busy_store_is_503_with_retry_after() {
        let busy = StoreError::Unavailable(format!(
            "claiming k in x.db: database is locked ({})",
            crate::store::BUSY_MARKER
        ));
        let response = ApiError::from(busy).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.headers().get(header::RETRY_AFTER),
            Some(&HeaderValue::from(BUSY_RETRY_AFTER_SECS))
        );
        let other = ApiError::from(StoreError::Database("disk on fire".into()));
        assert_eq!(other.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            other
                .into_response()
                .headers()
                .get(header::RETRY_AFTER)
                .is_none()
        );
    }
}

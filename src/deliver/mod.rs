//! Deliver: the on-disk outbox and the Sentry upload.

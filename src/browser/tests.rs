//! Host tests of the browser layer.

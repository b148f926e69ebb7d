//! Expert-parallel (MoE) dispatch and combine: the layer shape, seeded routing, the host
//! reference of the layout, the metrics, and the benchmark with its implementations.
pub mod metrics;
pub mod reference;
pub mod routing;
pub mod shape;

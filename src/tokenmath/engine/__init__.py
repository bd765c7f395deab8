"""The one engine: per-operation FLOPs, bytes and communication for a step, combined by the roofline."""

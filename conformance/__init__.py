"""Conformance suite for the Gateway API Inference Extension InferencePool API."""

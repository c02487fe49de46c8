"""Tests of the traffic tier's own machinery (conformance/traffic), run on this machine."""

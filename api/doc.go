/*
Copyright 2025 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package api holds the Go types of the InferencePool API checked by the
// conformance suite, and the tools that turn them into CustomResourceDefinitions.
//
// The types live in the versioned sub-packages (v1alpha2); the revisions of
// v1alpha2 that GIE released live under revisions/. The CRDs generated from
// them, together with the Gateway API standard-channel CRDs, are written to
// manifests/crd/ at the repository root by hack/generate-crds.sh.
package api

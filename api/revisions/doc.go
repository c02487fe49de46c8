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

// Package revisions holds the InferencePool v1alpha2 API as released by the
// Gateway API Inference Extension, one package per published revision, so that
// the suite can install on its embedded cluster the CRD a real cluster runs.
//
//   - v0_2/v1alpha2: releases v0.2.0 to v0.4.0. The seed's schema, except
//     that a status parent written without conditions defaults to a
//     condition of type Accepted.
//   - v0_5/v1alpha2: releases v0.5.x. status.parent[].parentRef names a
//     Gateway by group, kind, name and namespace, and a pool no controller
//     has written status for reads back with one placeholder parent.
//   - common: the spec and the validated string types both share. It has no
//     API group of its own, so controller-gen only inlines its types.
//
// hack/generate-crds.sh writes the CRD of each revision to
// manifests/crd/revisions/<revision>/.
package revisions

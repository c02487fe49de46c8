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

// Package revisions holds the InferencePool API as released by the Gateway API
// Inference Extension, one package per published schema revision, so that the
// suite can install on its embedded cluster the CRD a real cluster runs.
//
// inference.networking.x-k8s.io/v1alpha2:
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
// inference.networking.k8s.io/v1 (each CRD's bundle-version annotation names
// the oldest release of its revision):
//
//   - v1_0/v1: releases v1.0.0 and v1.0.1. One target port; an empty
//     selector.matchLabels is accepted; endpointPickerRef is required.
//   - v1_0_2/v1: release v1.0.2. selector.matchLabels needs 1 to 64 labels.
//   - v1_1/v1: releases v1.1.x to v1.3.x. Up to 8 target ports, no number
//     twice (a CEL rule); status entries may carry a controllerName.
//   - v1_4/v1: releases v1.4.x and v1.5.x. spec.appProtocol, http by default.
//   - v1_6/v1: releases v1.6.x. endpointPickerRef is optional.
//   - v1common: the types the v1 revisions share, inlined like common.
//
// hack/generate-crds.sh writes the CRD of each revision to
// manifests/crd/revisions/<revision>/.
package revisions

#!/bin/sh
# The conformance runner starts an adapter by path, without arguments: this one runs ours from
# the repository root, wherever it is started from.
cd "$(dirname "$0")/.." && exec python3 -m interop.client_conformance_adapter

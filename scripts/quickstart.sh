#!/usr/bin/env bash
# Install, ingest the bundled sample corpus with the embedded defaults
# (local LanceDB in .corpusflow/db, Prefect without a server, the offline
# multilingual use-m3 model), then run a sample search in English and in Chinese. Seven documents are fewer
# than run.ephemeral_api_min_documents, so the CLI processes them in-process
# instead of starting an ephemeral Prefect API (docs/operations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
.venv/bin/corpusflow ingest samples/corpus --db .corpusflow/db
.venv/bin/corpusflow search "What is the nightly hotel cap in Tier 1 cities?" --db .corpusflow/db -k 3
.venv/bin/corpusflow search "一类城市的酒店每晚住宿上限是多少？" --db .corpusflow/db -k 3

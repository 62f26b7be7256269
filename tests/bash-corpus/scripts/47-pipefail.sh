# pipefail changes a pipeline's status
false | true; echo "default: $?"
set -o pipefail
false | true; echo "pipefail: $?"

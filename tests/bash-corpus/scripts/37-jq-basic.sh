# jq field access
jq -r '.name' data/config.json
jq '.ports | length' data/config.json
jq -c '.ports' data/config.json

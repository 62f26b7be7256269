# jq select and map
jq -r '.owners[] | select(.role == "dev") | .name' data/config.json
jq -c '[.owners[].name] | map(ascii_upcase)' data/config.json
jq '.owners | map(select(.role=="dev")) | length' data/config.json

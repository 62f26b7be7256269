# jq builds new JSON
jq -n '{a: 1, b: [1,2,3] | add}'
echo '{"x": 2, "y": 3}' | jq -c '{sum: (.x + .y), keys: keys}'

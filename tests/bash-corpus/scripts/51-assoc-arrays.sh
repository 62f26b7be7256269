# associative arrays
declare -A color=([apple]=red [banana]=yellow)
color[grape]=purple
for k in apple banana grape; do echo "$k=${color[$k]}"; done
echo "${#color[@]}"

# indexed arrays
arr=(one two three)
arr+=(four)
echo "${#arr[@]} ${arr[1]} ${arr[-1]}"
for x in "${arr[@]}"; do printf '%s,' "$x"; done; echo
echo "${!arr[@]}"

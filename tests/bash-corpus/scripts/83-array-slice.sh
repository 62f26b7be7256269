# array slicing and string splitting
arr=(a b c d e)
echo "${arr[@]:1:3}"
IFS=: read -r -a parts <<< "x:y:z"
echo "${#parts[@]} ${parts[2]}"

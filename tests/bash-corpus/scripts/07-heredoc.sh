# here-doc with expansion
name=world
cat <<END
hello $name
sum: $((2 + 3))
END

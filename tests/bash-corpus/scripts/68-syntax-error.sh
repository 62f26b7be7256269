# a syntax error later in the script
echo "before the error"
if then fi
echo after

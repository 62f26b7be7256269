# quoted here-doc: no expansion
cat <<'END'
literal $HOME and $(date)
END

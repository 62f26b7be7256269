# <<- strips leading tabs
if true; then
	cat <<-END
	indented with tab
	END
fi

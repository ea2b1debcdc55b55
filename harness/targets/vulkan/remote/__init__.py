"""What runs on another machine (standard library or POSIX sh), its packing and what comes back."""

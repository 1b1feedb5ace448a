"""Layer 2: validated pydantic models. They call the core; the core never imports them."""

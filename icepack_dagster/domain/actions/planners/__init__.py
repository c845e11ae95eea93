"""Planning shared by several actions of one family (each action still is its own module one level up)."""

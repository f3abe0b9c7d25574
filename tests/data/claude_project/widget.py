def make_widget(name):
    return {"name": name}

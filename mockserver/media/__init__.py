"""What answers carry besides tokens: PNG painting, image sizes and their token cost, embedding spaces."""
